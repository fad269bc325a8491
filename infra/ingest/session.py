"""One ingest run's writer into the configured index, with its embedder and journal.

`quorum index`, `quorum pubmed sync` and `quorum embed` (and the benches that time them) open
the same things in the same order and close them the same way: the model only once there is
work, the writer of the configured backend, the journal of the index that writer writes. Closing
closes the writer (Elasticsearch's puts the index's refresh and replicas back) and drops an index
this run created but never committed to, so no empty index is left for a later `ask` to search.
The session prints nothing: progress, left-out records and notes go to the callbacks given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from infra.embeddings import Embedder, HuggingFaceEmbedder
from infra.errors import UserError
from infra.ingest.embed_job import EmbedJournal, EmbedReport, embed_missing
from infra.ingest.pipeline import IngestReport, Journal, ingest
from infra.ingest.sources import check
from infra.search.backends import (
    drop_index,
    existing_journal,
    index_exists,
    journal_path,
    open_writer,
    stored_dims,
)
from infra.search.base import IndexWriter
from infra.search.corpus import IndexMissing
from infra.settings import Settings


class VectorsNotStored(UserError):
    """The index refused some of the vectors written (Elasticsearch): a re-run retries them."""


def indexed_before(
    settings: Settings, sources: Sequence[Path], *, embeddings: bool
) -> IngestReport | None:
    """Return the report of a run with nothing to do, or None when `sources` hold work.

    Nothing to do: every file was read to the end before and is unchanged, into an index holding
    the kind of vectors asked for; then no model loads and no writer opens. (Asking for vectors an
    index lacks goes on to the writer, which names the mismatch.) A bad source fails here first.
    """
    for source in sources:
        check(source)
    known = existing_journal(settings)
    if known is None:
        return None
    journal = Journal(known)
    if not journal.all_finished(sources) or (stored_dims(settings) is not None) != embeddings:
        return None
    report = IngestReport()
    report.sources = {str(s): journal.done.get(Journal.key(s), 0) for s in sources}
    report.skipped = sum(report.sources.values())
    return report


class IngestSession:
    """The writer, embedder and journal of one run into the configured index; a context manager.

    Opened at the first write (`index` or `embed`), or by `open`; closed once, by `close` or at
    the end of the `with` block, whatever happened in it.
    """

    def __init__(self, settings: Settings, *, embeddings: bool = True):
        self.settings = settings
        self.embeddings = embeddings
        self.embedder: Embedder | None = None
        self.writer: IndexWriter | None = None
        self.journal: Journal | None = None
        self.created = False
        """The index did not exist before this session opened its writer."""
        self.completed = False
        """At least one `index` call ran to its end."""

    def __enter__(self) -> IngestSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, *, vectors_only: bool = False) -> None:
        """Load the model (with embeddings), open the writer and read its journal; once.

        With `vectors_only` the writer leaves the stored documents as they are and only adds
        vectors (`embed`): it is opened without the embedder.
        """
        if self.writer is not None:
            return
        self.embedder = HuggingFaceEmbedder(self.settings.embeddings) if self.embeddings else None
        self.created = not index_exists(self.settings)
        self.writer = open_writer(self.settings, None if vectors_only else self.embedder)
        self.journal = Journal(journal_path(self.settings, self.writer))

    def kept_shards(self) -> int | None:
        """Return an existing embedded index's shard count where the settings ask another."""
        search = self.settings.search
        if self.writer is None or self.created or search.backend != "embedded":
            return None
        shards = getattr(self.writer, "shards", 1)
        return shards if shards != search.embedded_shards else None

    def index(
        self,
        sources: Sequence[Path],
        *,
        batch_size: int = 256,
        commit_every: int = 4096,
        on_progress: Callable[[int, int], None] | None = None,
        on_reject: Callable[[str], None] | None = None,
    ) -> IngestReport:
        """Write `sources` into the index (pipeline.ingest); an interrupted run resumes."""
        self.open()
        report = ingest(
            sources,
            self.writer,
            self.embedder,
            self.journal,
            batch_size=batch_size,
            commit_every=commit_every,
            on_progress=on_progress,
            on_reject=on_reject,
        )
        self.completed = True
        return report

    def open_vectors(self, on_note: Callable[[str], None] | None = None) -> int:
        """Open to add the model's vectors; return how many stored documents lack one.

        The index must exist (named before any model loads); one holding another model's vectors
        gets this model's beside them, which `on_note` is told.
        """
        index = self.settings.search.index
        if not index_exists(self.settings):
            raise IndexMissing(
                f"index {index!r} does not exist; build it with "
                f"`quorum index FILE... --index {index} --no-embeddings`, then embed it"
            )
        self.open(vectors_only=True)
        stored = self.writer.vectors_model()
        if stored and stored != self.embedder.name and on_note is not None:
            on_note(
                f"index {index!r} holds {stored} vectors: computing {self.embedder.name}'s "
                "beside them (searches use the old ones until every document has a new one)"
            )
        return self.writer.count_unembedded()

    def embed(
        self,
        *,
        batch_size: int = 1024,
        commit_every: int = 8192,
        on_progress: Callable[[int], None] | None = None,
    ) -> EmbedReport:
        """Embed the documents that lack vectors (embed_job); a re-run resumes."""
        if self.writer is None:
            self.open_vectors()
        path = self.journal.path
        journal = EmbedJournal(path.with_name(f"embed-{path.name}"), self.embedder.name)
        try:
            return embed_missing(
                self.writer,
                self.embedder,
                journal,
                batch_size=batch_size,
                commit_every=commit_every,
                on_progress=on_progress,
            )
        except ValueError as exc:  # vectors Elasticsearch did not store
            raise VectorsNotStored(f"{exc}; run the same command again to retry them") from None

    def close(self) -> None:
        """Close the writer; drop the index if this session created it and never committed."""
        writer, self.writer = self.writer, None
        if writer is None:
            return
        writer.close()
        if self.created and not self.completed and not any(self.journal.done.values()):
            drop_index(self.settings)
