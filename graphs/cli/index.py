"""`quorum index`: corpus files into the configured search backend, resumable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from tqdm import tqdm

from graphs.cli import common
from graphs.cli.common import err, fail, settings_for
from infra.heartbeat import Heartbeat

if TYPE_CHECKING:
    from infra.ingest.pipeline import IngestReport
    from infra.settings import Settings


def index(
    sources: Annotated[list[Path], typer.Argument(help=".jsonl(.gz) or PubMed .xml(.gz) files.")],
    backend: common.WriterBackendOption = None,
    name: common.WriterIndexOption = None,
    embeddings: Annotated[
        bool,
        typer.Option("--embeddings/--no-embeddings", help="Store document vectors for reranking."),
    ] = True,
    batch_size: Annotated[int, typer.Option(min=1, max=10_000, help="Documents per batch.")] = 256,
    commit_every: Annotated[
        int,
        typer.Option(min=1, help="Documents between commits (a killed run resumes from the last)."),
    ] = 4096,
) -> None:
    """Index corpus files; re-indexing replaces by PMID, and an interrupted run resumes."""
    from nodes.describing import plural

    common.checked_backend(backend)
    search = {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}
    settings = settings_for(search=search) if search else settings_for()
    try:
        report = run_index(
            settings,
            sources,
            embeddings=embeddings,
            batch_size=batch_size,
            commit_every=commit_every,
        )
    except KeyboardInterrupt:
        fail("interrupted; run the same command again to resume from the last commit", 130)
    left_out = f", left out {len(report.rejected):,} (named above)" if report.rejected else ""
    err.print(
        f"indexed {plural(report.upserted, 'document')}, deleted {report.deleted:,}, resumed "
        f"past {report.skipped:,}{left_out} into {settings.search.backend}:{settings.search.index} "
        f"({report.docs_per_s:,.0f} docs/s)",
        markup=False,
    )
    if embeddings:
        refresh_dense_stage(settings)


def refresh_dense_stage(settings: Settings) -> None:
    """Build the IVF index and row codes when the vectors have outgrown them, with progress."""
    from infra.search.backends import refresh_dense

    bar = tqdm(unit=" rows", file=sys.stderr, dynamic_ncols=True, mininterval=0.5, disable=None)
    bar.set_description("vectors: IVF index / row codes")

    def progress(done: int, total: int) -> None:
        if done < bar.n:  # the IVF index is done and the row codes begin
            bar.reset(total)
        bar.total = total
        bar.update(done - bar.n)

    try:
        with Heartbeat(lambda: f"building the IVF index / row codes: {bar.n:,} rows"):
            said = refresh_dense(settings, progress)
    finally:
        bar.close()
    if said:
        err.print(said, markup=False)


def run_index(
    settings: Settings,
    sources: list[Path],
    *,
    embeddings: bool,
    batch_size: int,
    commit_every: int = 4096,
) -> IngestReport:
    """Index `sources` into the configured backend; a re-run after an interruption resumes."""
    from infra.embeddings import HuggingFaceEmbedder
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

    for source in sources:
        check(source)
    known = existing_journal(settings)
    if (
        known is not None
        and Journal(known).all_finished(sources)
        and (stored_dims(settings) is not None) == embeddings
    ):
        # Every file was read to the end before and is unchanged, into an index holding the kind
        # of vectors asked for: no model to load, no writer. (Asking for vectors an index lacks
        # goes on to open_writer, which names the mismatch.)
        done = Journal(known).done
        report = IngestReport()
        report.sources = {str(s): done.get(Journal.key(s), 0) for s in sources}
        report.skipped = sum(report.sources.values())
        return report
    embedder = HuggingFaceEmbedder(settings.embeddings) if embeddings else None
    existed = index_exists(settings)
    writer = open_writer(settings, embedder)
    shards = getattr(writer, "shards", 1) if settings.search.backend == "embedded" else 1
    if existed and shards != settings.search.embedded_shards:
        print(
            f"quorum: index {settings.search.index} keeps its {shards} shard"
            f"{'s' if shards != 1 else ''}: search.embedded_shards "
            f"({settings.search.embedded_shards}) applies to new indexes",
            file=sys.stderr,
        )
    # disable=None: a bar on terminals only, so logs and pipes get just the summary line.
    bar = tqdm(
        unit=" docs",
        file=sys.stderr,
        dynamic_ncols=True,
        smoothing=0.1,
        mininterval=0.5,
        disable=None,
    )
    deleted = indexed = 0

    def progress(docs: int, deletions: int) -> None:
        nonlocal deleted, indexed
        deleted += deletions
        indexed += docs
        bar.update(docs)
        if deletions:
            bar.set_postfix(deleted=deleted, refresh=False)

    journal = Journal(journal_path(settings, writer))
    finished = False

    def describe() -> str:
        return f"indexing: {indexed:,} documents, {deleted:,} deleted"

    try:
        with Heartbeat(describe):
            report = ingest(
                sources,
                writer,
                embedder,
                journal,
                batch_size=batch_size,
                commit_every=commit_every,
                on_progress=progress,
                on_reject=lambda why: bar.write(f"skipped {why}", file=sys.stderr),
            )
        finished = True
    finally:
        bar.close()
        writer.close()
        if not finished and not existed and not any(journal.done.values()):
            # Nothing was committed to an index this run created: leave no empty index behind
            # for a later `ask` to search.
            drop_index(settings)
    return report
