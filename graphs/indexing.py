"""`quorum index`: corpus files into the configured search backend, with progress and resume."""

from __future__ import annotations

import sys
from pathlib import Path

from tqdm import tqdm

from infra.backends import open_writer
from infra.embeddings import HuggingFaceEmbedder
from infra.ingest.pipeline import IngestReport, Journal, ingest
from infra.ingest.sources import check
from infra.search.base import IndexWriter
from infra.search.embedded_store import EmbeddedWriter
from infra.settings import Settings


def journal_path(settings: Settings, writer: IndexWriter) -> Path:
    """Return the index's ingestion journal: tied to that index, so a re-created one starts over."""
    if isinstance(writer, EmbeddedWriter):
        return writer.path / "ingest-journal.json"
    identity = writer.identity()  # Elasticsearch: the index's UUID
    return settings.home / "ingest" / f"elasticsearch-{settings.search.index}-{identity}.json"


def run_index(
    settings: Settings,
    sources: list[Path],
    *,
    embeddings: bool,
    batch_size: int,
    commit_every: int = 4096,
) -> IngestReport:
    """Index `sources` into the configured backend; a re-run after an interruption resumes."""
    for source in sources:
        check(source)
    embedder = HuggingFaceEmbedder(settings.embeddings) if embeddings else None
    writer = open_writer(settings, embedder)
    # disable=None: a bar on terminals only, so logs and pipes get just the summary line.
    bar = tqdm(
        unit=" docs",
        file=sys.stderr,
        dynamic_ncols=True,
        smoothing=0.1,
        mininterval=0.5,
        disable=None,
    )
    deleted = 0

    def progress(docs: int, deletions: int) -> None:
        nonlocal deleted
        deleted += deletions
        bar.update(docs)
        if deletions:
            bar.set_postfix(deleted=deleted, refresh=False)

    try:
        report = ingest(
            sources,
            writer,
            embedder,
            Journal(journal_path(settings, writer)),
            batch_size=batch_size,
            commit_every=commit_every,
            on_progress=progress,
        )
    finally:
        bar.close()
        writer.close()
    return report
