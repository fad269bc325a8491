"""Ingestion: sources → batches → (embeddings) → an index writer, resumable through a journal."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.embeddings import Embedder, document_text
from infra.ingest.sources import MAX_RECORD_CHARS, check, events
from infra.search.base import IndexWriter


@dataclass
class IngestReport:
    """What one `ingest` call did."""

    upserted: int = 0
    deleted: int = 0
    skipped: int = 0
    """Events resumed past (done by an earlier, interrupted run)."""
    rejected: list[str] = field(default_factory=list)
    """Records left out, each with where and why (over the size limit, no PMID)."""
    seconds: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)

    @property
    def docs_per_s(self) -> float:
        """Return documents written per second."""
        return self.upserted / self.seconds if self.seconds else 0.0


class Journal:
    """How far each source file got, saved at every commit so a re-run resumes there.

    On disk: {"positions": {source key: events done}, "finished": [source keys read to the end]}
    (an older journal, the positions alone, still reads).
    """

    def __init__(self, path: Path):
        self.path = path
        self.done: dict[str, int] = {}
        self.finished: set[str] = set()
        try:
            data = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            # An unreadable journal only costs time: re-indexing is idempotent by PMID.
            data = {}
        if isinstance(data.get("positions"), dict):
            self.done, self.finished = data["positions"], set(data.get("finished") or [])
        elif isinstance(data, dict):
            self.done = {k: v for k, v in data.items() if isinstance(v, int)}

    def all_finished(self, sources: Sequence[Path]) -> bool:
        """Tell whether every source, unchanged, was already read to the end."""
        return all(self.key(source) in self.finished for source in sources)

    @staticmethod
    def key(source: Path) -> str:
        """Identify a file by path, size and modification time (a changed file starts over)."""
        stat = source.stat()
        return f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"

    def save(self) -> None:
        """Write the journal atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            written = {"positions": self.done, "finished": sorted(self.finished)}
            fh.write(json.dumps(written, indent=1))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


def ingest(
    sources: Sequence[Path],
    writer: IndexWriter,
    embedder: Embedder | None,
    journal: Journal,
    *,
    batch_size: int = 256,
    commit_every: int = 4096,
    on_progress: Callable[[int, int], None] | None = None,
    on_reject: Callable[[str], None] | None = None,
    max_record_chars: int = MAX_RECORD_CHARS,
) -> IngestReport:
    """Write every source's events into the index in order; deletions apply where they stand.

    Every `commit_every` documents the index commits and the journal records each source's
    position, so an interrupted run, started again with the same files, resumes there.
    Records left out are reported through `on_reject` and kept in the report.
    """
    for source in sources:
        check(source)
    run = _Run(writer, embedder, journal, on_progress or (lambda docs, deletions: None))
    started = time.perf_counter()
    for source in sources:
        key = Journal.key(source)
        done = journal.done.get(key, 0)
        if key in journal.finished:  # read to the end before, unchanged since: nothing to do
            run.report.skipped += done
            run.report.sources[str(source)] = done
            continue
        position = 0
        for action, value in events(source, max_record_chars=max_record_chars):
            position += 1
            if position <= done:
                run.report.skipped += 1
                continue
            if action == "skip":
                run.report.rejected.append(value)
                if on_reject is not None:
                    on_reject(value)
            elif action == "upsert":
                run.batch.append(value)
                if len(run.batch) >= batch_size:
                    run.flush()
            else:
                run.flush()  # a deletion must not overtake the upserts before it
                run.report.deleted += writer.delete([value])
                run.on_progress(0, 1)
            if run.since_commit >= commit_every:
                run.commit(key, position)
        journal.finished.add(key)
        run.commit(key, position)
        run.report.sources[str(source)] = position
    run.report.seconds = time.perf_counter() - started
    return run.report


@dataclass
class _Run:
    writer: IndexWriter
    embedder: Embedder | None
    journal: Journal
    on_progress: Callable[[int, int], None]
    report: IngestReport = field(default_factory=IngestReport)
    batch: list[dict[str, Any]] = field(default_factory=list)
    since_commit: int = 0

    def flush(self) -> None:
        if not self.batch:
            return
        vectors = None
        if self.embedder is not None:
            # The pipelined corpus path where the embedder has one (test embedders do not).
            embed = getattr(self.embedder, "embed_corpus", self.embedder.embed_documents)
            vectors = embed([document_text(d["title"], d["abstract"]) for d in self.batch])
        written = self.writer.upsert(self.batch, vectors)
        self.report.upserted += written
        self.since_commit += len(self.batch)
        self.on_progress(len(self.batch), 0)
        self.batch = []

    def commit(self, key: str, position: int) -> None:
        self.flush()
        self.writer.commit()
        self.journal.done[key] = position
        self.journal.save()
        self.since_commit = 0
