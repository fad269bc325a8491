"""A single-node Elasticsearch on 127.0.0.1 without Docker: started, checked, stopped.

`python -m lab.elasticsearch_server start|stop|status [--dir D] [--port P]`. The node's
distribution is fetched from Maven Central and configured by `lab.elasticsearch_dist`.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from platformdirs import user_data_dir

from lab.elasticsearch_dist import (
    VERSION,
    ServerError,
    check_reachable,
    chown,
    configure,
    find_java,
    log,
    run_as,
    unpack,
)
from lab.java_runtime import Java

DEFAULT_PORT = 9200


def default_dir() -> Path:
    """Return the work directory: $QUORUM_ES_DIR, else $QUORUM_HOME/elasticsearch."""
    if os.environ.get("QUORUM_ES_DIR"):
        return Path(os.environ["QUORUM_ES_DIR"])
    return Path(os.environ.get("QUORUM_HOME") or user_data_dir("quorum")) / "elasticsearch"


def _get(url: str, timeout: float = 2.0) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _read_state(work: Path) -> dict:
    try:
        return json.loads((work / "run" / "server.json").read_text())
    except (OSError, ValueError):
        return {}


def _pid(work: Path) -> int | None:
    """Return the pid of this work dir's node when that process is alive."""
    try:
        pid = int((work / "run" / "elasticsearch.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if str(work).encode() in cmdline else None


def _alive(pid: int) -> bool:
    """Tell whether a process still holds its files (a zombie has released its port)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _health(url: str, wait: str = "") -> str | None:
    query = f"?wait_for_status={wait}&timeout=1s" if wait else ""
    body = _get(f"{url}/_cluster/health{query}", timeout=5.0)
    return body.get("status") if body and not body.get("timed_out") else None


def ensure_running(
    dir: Path | str | None = None,
    port: int = DEFAULT_PORT,
    *,
    version: str = VERSION,
    timeout_s: float = 180.0,
) -> str:
    """Provision and start the node unless it already runs healthy; return its URL."""
    work = Path(dir or default_dir()).absolute()
    (work / "run").mkdir(parents=True, exist_ok=True)
    # Test sessions started side by side share one work dir: one of them starts the node.
    with open(work / "run" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_running(work, port, version, timeout_s)


def _ensure_running(work: Path, port: int, version: str, timeout_s: float) -> str:
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    if _pid(work) is not None:
        running_port = _read_state(work).get("port")
        if running_port != port:
            raise ServerError(f"the node of {work} already runs on port {running_port}")
        if _wait_healthy(work, url, deadline):
            return url
        raise ServerError(f"the node of {work} runs but is not healthy; log tail:\n{_logs(work)}")
    if _port_open(port):
        nodes = (_get(f"{url}/_nodes/_local?filter_path=nodes.*.name") or {}).get("nodes", {})
        who = next((f"node {n['name']}" for n in nodes.values()), "not Elasticsearch")
        raise ServerError(
            f"port {port} is taken by another process ({who}), not the node of {work}"
        )
    started = time.monotonic()
    java = find_java(version)
    home = unpack(work, version)
    configure(work, home, port, java)
    (work / "run" / "server.json").write_text(json.dumps({"port": port, "version": version}))
    log(f"starting {version} on {url} with Java {java.major} ({java.source})")
    if _launch(work, home, java, deadline) and (health := _wait_healthy(work, url, deadline)):
        log(f"up at {url} ({health}) after {time.monotonic() - started:.1f} s")
        return url
    tail = _logs(work)
    stop(work)
    raise ServerError(f"Elasticsearch did not become healthy on {url}; log tail:\n{tail}")


def _launch(work: Path, home: Path, java: Java, deadline: float) -> bool:
    """Run `bin/elasticsearch -d` (as an unprivileged user under root); tell whether it started."""
    user, run = run_as(), work / "run"
    for sub in ("data", "logs"):
        (work / sub).mkdir(exist_ok=True)
    (run / "elasticsearch.pid").unlink(missing_ok=True)
    if user is not None:
        check_reachable(work, user)
        chown([home, work / "data", work / "logs", run], user)
    env = {**os.environ, "ES_JAVA_HOME": str(java.home), "ES_PATH_CONF": str(home / "config")}
    env.pop("ES_JAVA_OPTS", None)
    with open(work / "logs" / "launcher.log", "wb") as out:
        proc = subprocess.Popen(
            [str(home / "bin" / "elasticsearch"), "-d", "-p", str(run / "elasticsearch.pid")],
            cwd=home,
            env={**env, "HOME": str(run)} if user else env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=[] if user else None,
        )
        try:
            return proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            return False


def _wait_healthy(work: Path, url: str, deadline: float) -> str | None:
    while time.monotonic() < deadline and _pid(work) is not None:
        if health := _health(url, wait="yellow"):
            return health
        time.sleep(0.5)
    return None


def _logs(work: Path, lines: int = 20) -> str:
    """Return the tail of the launcher's output, else of the server log."""
    for name in ("launcher.log", "quorum.log"):
        path = work / "logs" / name
        text = path.read_text(errors="replace").strip() if path.exists() else ""
        if text:
            return "\n".join(text.splitlines()[-lines:])
    return "(no log)"


def stop(dir: Path | str | None = None, timeout_s: float = 60.0) -> bool:
    """Stop the node of this work dir and wait for it to exit; return whether it was running."""
    work = Path(dir or default_dir()).absolute()
    pid = _pid(work)
    if pid is None:
        return False
    log(f"stopping pid {pid}")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.1)
    (work / "run" / "elasticsearch.pid").unlink(missing_ok=True)
    return True


def status(dir: Path | str | None = None, port: int | None = None) -> tuple[str, str | None]:
    """Return the node's URL and cluster health (None when it is down)."""
    work = Path(dir or default_dir()).absolute()
    port = port or _read_state(work).get("port") or DEFAULT_PORT
    url = f"http://127.0.0.1:{port}"
    return url, (_health(url) if _pid(work) is not None else None)


def main(argv: list[str] | None = None) -> int:
    """Run `start`, `stop` or `status` from the command line."""
    parser = argparse.ArgumentParser(prog="python -m lab.elasticsearch_server")
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--dir", type=Path, default=None, help="work dir ($QUORUM_ES_DIR)")
    parser.add_argument("--port", type=int, default=None, help=f"HTTP port ({DEFAULT_PORT})")
    parser.add_argument("--version", default=VERSION, help=f"Elasticsearch version ({VERSION})")
    parser.add_argument("--timeout", type=float, default=180.0, help="start timeout, seconds")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            port = args.port or DEFAULT_PORT
            print(ensure_running(args.dir, port, version=args.version, timeout_s=args.timeout))
            return 0
        if args.command == "stop":
            if not stop(args.dir):
                log("not running")
            return 0
        url, health = status(args.dir, args.port)
        print(f"{url} {health or 'down'}")
        return 0 if health else 1
    except ServerError as exc:
        log(str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main())
