"""`quorum embed`'s job: vectors for every stored document that lacks them, resumable.

Ingestion can run without vectors at full speed; this job adds them later (on a GPU machine,
say). What still lacks a vector is read from the index itself: the embedded engine keeps a
watermark row below which every row has its vector, Elasticsearch the documents without an
`embedding` field. Vectors are written and made durable before the watermark moves or the
journal counts them, so a killed run, started again, carries on where its last commit stood and
no document is embedded twice (only the batch in flight at the kill is lost and redone).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from infra.embeddings import Embedder, document_text
from infra.search.unembedded import Unembedded

READ_AHEAD = 2
"""Batches read from the index ahead of the one being embedded."""


class VectorWriter(Protocol):
    """An index writer that can add vectors to documents it already holds."""

    def start_vectors(self, dims: int, model: str) -> None:
        """Store vectors of this model and dimension (ValueError if it holds others)."""
        ...

    def unembedded(self, batch_size: int) -> Iterator[Unembedded]:
        """Yield the stored documents without vectors, in batches."""
        ...

    def set_vectors(self, keys: Sequence[Any], vectors: np.ndarray, through: int) -> None:
        """Write the vectors of these documents."""
        ...

    def commit_vectors(self) -> None:
        """Make the vectors written so far durable."""
        ...

    def finish_vectors(self) -> None:
        """After a complete scan: put another model's vectors, if computed, into use."""
        ...


@dataclass
class EmbedReport:
    """What one `embed_missing` call did, and what earlier runs into the same index did."""

    embedded: int = 0
    earlier: int = 0
    """Documents embedded by earlier (interrupted) runs, from the journal."""
    batches: int = 0
    seconds: float = 0.0

    @property
    def docs_per_s(self) -> float:
        """Return documents embedded per second."""
        return self.embedded / self.seconds if self.seconds else 0.0


class EmbedJournal:
    """How many documents each run embedded into an index, saved at every commit.

    The index says what is left to do; the journal says what was done, for the progress line
    and the report ("resumed after 12,288 embedded earlier").
    """

    def __init__(self, path: Path, model: str):
        self.path, self.model = path, model
        try:
            data = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            data = {}  # an unreadable journal costs only the count: the index knows the rest
        same = isinstance(data, dict) and data.get("model") == model
        self.runs: list[int] = [int(n) for n in data.get("runs", [])] if same else []

    @property
    def earlier(self) -> int:
        """Return the documents embedded by runs before this one."""
        return sum(self.runs[:-1])

    def start(self) -> None:
        """Begin a run's count."""
        self.runs.append(0)

    def add(self, docs: int) -> None:
        """Count documents this run embedded (after they were made durable)."""
        self.runs[-1] += docs

    def save(self) -> None:
        """Write the journal atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"model": self.model, "runs": self.runs}))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


def embed_missing(
    writer: VectorWriter,
    embedder: Embedder,
    journal: EmbedJournal,
    *,
    batch_size: int = 1024,
    commit_every: int = 8192,
    on_progress: Callable[[int], None] | None = None,
) -> EmbedReport:
    """Embed every document of the index that lacks a vector, committing as it goes."""
    writer.start_vectors(embedder.dim, embedder.name)
    journal.start()
    report = EmbedReport(earlier=journal.earlier)
    started = time.perf_counter()
    pending = 0
    with ReadAhead(writer.unembedded(batch_size), READ_AHEAD) as batches:
        for batch, vectors in _embedded(batches, embedder):
            writer.set_vectors(batch.keys, vectors, batch.through)
            pending += len(batch.docs)
            report.batches += 1
            if on_progress is not None:
                on_progress(len(batch.docs))
            if pending >= commit_every:
                _commit(writer, journal, report, pending)
                pending = 0
    _commit(writer, journal, report, pending)
    writer.finish_vectors()
    report.seconds = time.perf_counter() - started
    return report


def _embedded(
    batches: Iterable[Unembedded], embedder: Embedder
) -> Iterator[tuple[Unembedded, np.ndarray]]:
    """Yield each batch with its documents' vectors, in order.

    The batches go to the embedder as one stream: a real model's tokenizing threads run ahead
    across them (`embed_stream`); an embedder without a stream (a test's) takes one at a time.
    """
    stream = getattr(embedder, "embed_stream", None) or _one_at_a_time(embedder)
    waiting: deque[Unembedded] = deque()

    def texts() -> Iterator[list[str]]:
        for batch in batches:
            waiting.append(batch)
            yield [document_text(d["title"], d["abstract"]) for d in batch.docs]

    for found in stream(texts()):
        yield waiting.popleft(), np.asarray(found, dtype=np.float32)


def _one_at_a_time(embedder: Embedder) -> Callable[[Iterable[list[str]]], Iterator[np.ndarray]]:
    """Return a stream that embeds each chunk on its own (corpus path where there is one)."""
    embed = getattr(embedder, "embed_corpus", embedder.embed_documents)

    def stream(chunks: Iterable[list[str]]) -> Iterator[np.ndarray]:
        for texts in chunks:
            yield embed(texts) if texts else np.zeros((0, embedder.dim), dtype=np.float32)

    return stream


class ReadAhead:
    """Iterate `source` in a thread of its own, up to `depth` items ahead of the consumer.

    Reading a batch from the index (a term-set query and the stored texts) takes as long as
    the GPU takes to embed it; in its own thread it overlaps the encoder instead of stalling it.
    An exception in the source is raised in the consumer; leaving the block early stops the
    thread at its next item.
    """

    _END = object()

    def __init__(self, source: Iterable[Any], depth: int):
        self._source = source
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="read-ahead", daemon=True)

    def __enter__(self) -> Iterator[Any]:
        self._thread.start()
        return self._items()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        while self._thread.is_alive():  # unblock a producer waiting on a full queue
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def _items(self) -> Iterator[Any]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._source:
                if not self._put(item):
                    return
        except BaseException as error:  # handed to the consumer, raised there
            self._put(_Failure(error))
            return
        finally:
            close = getattr(self._source, "close", None)
            if close is not None and self._stop.is_set():
                close()  # a generator's own cleanup (its searchers, a point in time) runs here
        self._put(self._END)


@dataclass
class _Failure:
    error: BaseException


def _commit(writer: VectorWriter, journal: EmbedJournal, report: EmbedReport, docs: int) -> None:
    writer.commit_vectors()
    journal.add(docs)
    journal.save()
    report.embedded += docs
