"""`quorum index`: corpus files into the configured search backend, resumable.

The work is the ingest session's (infra/ingest/session.py); here the arguments, the progress
shown (a bar on a terminal, heartbeat lines elsewhere) and the summary line.
"""

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
    from infra.ingest.session import indexed_before
    from nodes.describing import plural

    common.checked_backend(backend)
    search = {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}
    settings = settings_for(search=search) if search else settings_for()
    try:
        report = indexed_before(settings, sources, embeddings=embeddings)
        if report is None:
            report = _indexed(
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


def _indexed(
    settings: Settings,
    sources: list[Path],
    *,
    embeddings: bool,
    batch_size: int,
    commit_every: int,
) -> IngestReport:
    """Index through an ingest session: a bar on a terminal, heartbeat lines elsewhere."""
    from infra.ingest.session import IngestSession

    with IngestSession(settings, embeddings=embeddings) as session:
        session.open()
        if (shards := session.kept_shards()) is not None:
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

        def describe() -> str:
            return f"indexing: {indexed:,} documents, {deleted:,} deleted"

        try:
            with Heartbeat(describe):
                return session.index(
                    sources,
                    batch_size=batch_size,
                    commit_every=commit_every,
                    on_progress=progress,
                    on_reject=lambda why: bar.write(f"skipped {why}", file=sys.stderr),
                )
        finally:
            bar.close()


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
