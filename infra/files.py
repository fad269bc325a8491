"""Writing files users name: never over something that is not a regular file, never half-done.

And a lock file held for the life of the process (one `quorum pubmed sync` per index).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import uuid
from pathlib import Path
from typing import Any

from infra.errors import UnusableHome, UserError

_HELD: list = []
"""Lock files held open for the life of the process (the lock goes with the process)."""


class UnsafeTarget(UserError):
    """A path quorum was asked to write that it must not, or cannot, write."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_target(path: Path, *, what: str = "output", create_parent: bool = False) -> None:
    """Refuse a target that exists but is not a regular file, or whose directory is not writable.

    With `create_parent`, a missing directory is created (as `mkdir -p` would) instead.

    NOTE: writes go through a temporary file renamed over the target; renamed over /dev/full
    or a FIFO, that replaces the special file itself (as root, the device node is gone).
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode  # follows a symbolic link to what it names
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UnsafeTarget(f"{what} {path}: cannot inspect it ({exc.strerror})") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise UnsafeTarget(f"{what} {path} is {_kind(mode)}, not a file: name a file to write")
    parent = path.resolve().parent
    if not parent.is_dir() and create_parent:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UnsafeTarget(
                f"{what} {path}: cannot create directory {parent} ({exc.strerror})"
            ) from None
    if not parent.is_dir():
        raise UnsafeTarget(f"{what} {path}: no directory {parent} to write into; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnsafeTarget(f"{what} {path}: directory {parent} is not writable; choose another")


def write_atomic(
    path: Path, data: str | bytes, *, fsync: bool = False, what: str = "output"
) -> None:
    """Write data to path through a temporary file in the same directory, then rename it."""
    path = Path(path)
    check_target(path, what=what)
    target = path.resolve()  # a symbolic link keeps pointing at the file it named
    # Not mkstemp: its 0600 mode would make the file unreadable to whoever it is shared with.
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, value: Any, *, what: str = "output") -> None:
    """Write one JSON document atomically and durably."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    write_atomic(path, text, fsync=True, what=what)


_HOME_FIX = {
    errno.EROFS: "set QUORUM_HOME to a directory on a writable file system",
    errno.EACCES: "set QUORUM_HOME to a directory you may write, or fix its permissions",
    errno.EPERM: "set QUORUM_HOME to a directory you may write, or fix its permissions",
    errno.ENOSPC: "free some space there, or set QUORUM_HOME to a disk with room",
    errno.ENOTDIR: "set QUORUM_HOME to a directory (it is created when missing)",
}


def usable_home(home: Path) -> Path:
    """Return the data directory once a small file was written and removed there.

    Checked before anything loads, so a bad QUORUM_HOME is one line naming the path, what is
    wrong and the fix, at once, rather than a library's message after the models loaded
    (tantivy's "Failed to acquire Lockfile", a NotADirectoryError on meta.json).
    """
    if home.exists() and not home.is_dir():
        raise UnusableHome(
            f"QUORUM_HOME {home} is a file, not a directory; {_HOME_FIX[errno.ENOTDIR]}"
        )
    probe = home / f".quorum-write-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"quorum")
        probe.unlink()
    except OSError as exc:
        fix = _HOME_FIX.get(exc.errno or 0, "set QUORUM_HOME to a directory quorum may write")
        raise UnusableHome(
            f"QUORUM_HOME {home} cannot be written ({exc.strerror or exc}); {fix}"
        ) from None
    return home


def hold_lock(path: Path) -> bool:
    """Hold an exclusive lock on `path` until the process ends; False if another process has it."""
    handle = open(path, "w")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return False
    _HELD.append(handle)
    return True
