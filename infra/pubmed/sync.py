"""Keep an index in step with PubMed: fetch new baseline and update files, apply them in order.

Downloads run a few at a time (Mirror does the fetching and verifying); files are applied one by
one in file order, each only once it is verified, and each is recorded in the state file once
its ingest has committed. A later run fetches and applies only the files the state lacks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from infra.errors import UserError
from infra.pubmed.mirror import Mirror, RemoteFile, write_atomic

STATE_VERSION = 1


class UnknownFile(UserError):
    """An --until naming a file the mirror does not list."""


@dataclass
class Applied:
    """What applying one file did (`apply`'s answer: sync_job.Applier's, or a test's)."""

    records: int = 0
    deleted: int = 0
    skipped: int = 0


@dataclass
class SyncSummary:
    """A sync's totals: what `--json` prints (`already` goes to stderr only)."""

    files_downloaded: int = 0
    files_applied: int = 0
    records: int = 0
    deleted: int = 0
    skipped: int = 0
    """Records left out: articles without a PMID, or over the size limit."""
    already: int = 0
    """Files listed on the mirror that earlier runs applied (neither fetched nor applied now)."""

    def summary(self) -> dict[str, int]:
        """Return the `--json` object."""
        return {k: v for k, v in asdict(self).items() if k != "already"}


class SyncState:
    """Which files are applied to one index, by name with their MD5, saved atomically."""

    def __init__(self, path: Path):
        self.path = path
        self.applied: dict[str, dict] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                raise UserError(
                    f"{path} is not valid JSON; delete it to apply every file again"
                ) from None
            self.applied = {a["name"]: a for a in data.get("applied", [])}

    def record(self, name: str, md5: str, applied: Applied) -> None:
        """Record `name` as applied and save at once."""
        self.applied[name] = {"name": name, "md5": md5, **asdict(applied)}
        self.save()

    def reset(self) -> None:
        """Forget every applied file (the index they went into is gone)."""
        self.applied = {}
        self.save()

    def save(self) -> None:
        """Write the state file atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": STATE_VERSION, "applied": list(self.applied.values())}
        write_atomic(self.path, json.dumps(data, indent=1) + "\n")


def until_index(files: list[RemoteFile], until: str | None) -> int:
    """Return how many of `files` to consider: all, or up to and including `until`."""
    if until is None:
        return len(files)
    wanted = until.strip().rsplit("/", 1)[-1]
    wanted = wanted if wanted.endswith(".xml.gz") else wanted + ".xml.gz"
    for i, remote in enumerate(files):
        if remote.name == wanted:
            return i + 1
    first, last = (files[0].name, files[-1].name) if files else ("none", "none")
    raise UnknownFile(
        f"--until {until!r}: the mirror lists no such file (it holds {len(files)} files, "
        f"{first} … {last}); name one of them, e.g. --until {last}"
    )


def plan(
    files: list[RemoteFile], state: SyncState, until: str | None
) -> tuple[list[RemoteFile], int]:
    """Return (the files to fetch and apply, in order; how many were applied before)."""
    listed = files[: until_index(files, until)]
    todo = [f for f in listed if f.name not in state.applied]
    return todo, len(listed) - len(todo)


@dataclass
class SyncProgress:
    """Counters the sync updates as it goes (from several threads); `changed` is told each time."""

    total: int = 0
    files_done: int = 0
    bytes: int = 0
    records: int = 0
    deleted: int = 0
    started: float = field(default_factory=time.monotonic)
    changed: Callable[[SyncProgress], None] = lambda progress: None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        """Add to the named counters."""
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)
        self.changed(self)

    def eta_s(self) -> float | None:
        """Return the seconds left at the rate files were applied so far, or None before one."""
        if not self.files_done:
            return None
        per_file = (time.monotonic() - self.started) / self.files_done
        return per_file * (self.total - self.files_done)


def sync(
    mirror: Mirror,
    todo: list[RemoteFile],
    folder: Path,
    state: SyncState,
    apply: Callable[[Path], Applied],
    *,
    summary: SyncSummary,
    concurrency: int = 3,
    keep: bool = False,
    progress: SyncProgress | None = None,
) -> SyncSummary:
    """Fetch `todo` (a few at a time) and apply each file in order once it is verified.

    A failure (a mismatch, a 404, a stalled mirror) stops the sync at that file: the files before
    it stay applied and recorded, the error propagates, and nothing of the file is indexed.
    Applied files are deleted from `folder` unless `keep`. `apply` (sync_job.Applier: the
    ingest session) reports its own records to `progress` as it goes; the sync counts files and
    bytes.
    """
    progress = progress or SyncProgress()
    progress.total = len(todo)
    folder.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    counting = threading.Lock()  # the fetch threads count their downloads into one summary
    window = max(2 * concurrency, 1)  # verified files waiting to be applied, at most

    def fetch(remote: RemoteFile) -> str:
        md5, fetched = mirror.fetch(
            remote, folder, stop=stop, on_bytes=lambda n: progress.add(bytes=n)
        )
        if fetched:
            with counting:
                summary.files_downloaded += 1
        return md5

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="pubmed-fetch")
    futures: list[Future[str]] = []
    interrupted = False
    try:
        for i, remote in enumerate(todo):
            while len(futures) < min(len(todo), i + window):
                futures.append(pool.submit(fetch, todo[len(futures)]))
            md5 = futures[i].result()
            path = folder / remote.name
            applied = apply(path)
            state.record(remote.name, md5, applied)
            summary.files_applied += 1
            summary.records += applied.records
            summary.deleted += applied.deleted
            summary.skipped += applied.skipped
            if not keep:
                path.unlink(missing_ok=True)
                (folder / (remote.name + ".md5")).unlink(missing_ok=True)
            progress.add(files_done=1)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        stop.set()
        # Interrupted, leave at once: a transfer blocked in a read would hold the exit for up to
        # its timeout; it stops at its next chunk, its .part kept for the next run.
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    return summary
