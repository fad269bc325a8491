"""Run `quorum` with every network destination it asks for written down, in a network namespace
of its own where the machine allows one (`unshare -n`: no interface but a downed loopback).

`python -m tests.support.offline ARGS…` is `quorum ARGS…` with an audit hook
(`socket.getaddrinfo` and `socket.connect`, PEP 578) that appends each destination that is not a
Unix socket to the file named by $QUORUM_TEST_DESTINATIONS, so a test sees what was attempted
even where the namespace is not available or the attempt failed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

DESTINATIONS = "QUORUM_TEST_DESTINATIONS"


def _hook(path: str):
    def record(event: str, args: tuple) -> None:
        if event == "socket.getaddrinfo":
            line = f"lookup {args[0]}:{args[1]}"
        elif event == "socket.connect" and getattr(args[0], "family", None) != socket.AF_UNIX:
            line = f"connect {args[1]!r}"
        else:
            return
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    return record


def namespace_prefix() -> list[str]:
    """Return `unshare -n` when this machine lets a process take a network namespace, else []."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    tried = subprocess.run([unshare, "-n", "true"], capture_output=True)
    if tried.returncode == 0:
        return [unshare, "-n"]
    tried = subprocess.run([unshare, "-rn", "true"], capture_output=True)
    return [unshare, "-rn"] if tried.returncode == 0 else []


def command(*args: str) -> list[str]:
    """Return the command line that runs `quorum ARGS…` watched, isolated where possible."""
    return [*namespace_prefix(), sys.executable, "-m", "tests.support.offline", *args]


def destinations(path: Path) -> list[str]:
    """Return the destinations a watched run asked for, in order."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


if __name__ == "__main__":
    sys.addaudithook(_hook(os.environ[DESTINATIONS]))
    from graphs.cli import main

    sys.argv = ["quorum", *sys.argv[1:]]
    main()
