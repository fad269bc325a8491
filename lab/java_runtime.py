"""Finding a Java runtime on this machine (for the Elasticsearch the project starts)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

_JAVA_ENV = ("QUORUM_ES_JAVA_HOME", "ES_JAVA_HOME")


@dataclass(frozen=True)
class Java:
    """A Java runtime Elasticsearch may run on."""

    home: Path
    major: int
    modules: frozenset[str]
    source: str


def _inspect_java(home: Path, source: str) -> Java | None:
    release = home / "release"
    if not (home / "bin" / "java").exists() or not release.exists():
        return None
    fields = {}
    for line in release.read_text().splitlines():
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip().strip('"')
    try:
        major = int(fields.get("JAVA_VERSION", "0").split(".")[0])
    except ValueError:
        return None
    return Java(home, major, frozenset(fields.get("MODULES", "").split()), source)


def _java_candidates() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    if os.environ.get("JAVA_HOME"):
        found.append((Path(os.environ["JAVA_HOME"]), "$JAVA_HOME"))
    jvms = Path("/usr/lib/jvm")
    if jvms.is_dir():
        found += [(p, str(p)) for p in sorted(jvms.iterdir(), reverse=True) if p.is_dir()]
    if java := shutil.which("java"):
        found.append((Path(java).resolve().parent.parent, "java on PATH"))
    return found


def find_jdk(need: int, required: tuple[str, ...]) -> tuple[Java, list[str]]:
    """Return the first Java `need`+ with the `required` modules, and why others were skipped.

    $QUORUM_ES_JAVA_HOME or $ES_JAVA_HOME when set (and then only it), else $JAVA_HOME, the
    JDKs under /usr/lib/jvm, and `java` on PATH. Raises LookupError saying what was found.
    """
    explicit = [(Path(os.environ[v]), f"${v}") for v in _JAVA_ENV if os.environ.get(v)][:1]
    rejected = []
    for home, source in explicit or _java_candidates():
        java = _inspect_java(home, source)
        missing = sorted(set(required) - java.modules) if java and java.modules else []
        if java and java.major >= need and not missing:
            return java, rejected
        if java:
            why = f"lacks {', '.join(missing)}" if missing else f"is older than {need}"
            rejected.append(f"{source}'s Java {java.major} {why}")
    detail = "; ".join(rejected) or "no Java found"
    raise LookupError(
        f"no Java {need}+ with {', '.join(sorted(required)) or 'its base modules'} ({detail})"
    )
