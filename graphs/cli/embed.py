"""`quorum embed`: vectors for every document of an index that lacks them, resumable."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer
from tqdm import tqdm

from graphs.cli import common
from graphs.cli.common import CliError, err, fail, settings_for
from infra.heartbeat import Heartbeat

if TYPE_CHECKING:
    from infra.ingest.embed_job import EmbedReport
    from infra.settings import Settings


def embed(
    name: common.WriterIndexOption = None,
    backend: common.WriterBackendOption = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device", help="Where the model runs: auto, cpu, cuda or mps (default: settings)."
        ),
    ] = None,
    batch_size: Annotated[
        int, typer.Option(min=1, max=100_000, help="Documents read, embedded and written at once.")
    ] = 1024,
    commit_every: Annotated[
        int, typer.Option(min=1, help="Documents between commits (a killed run resumes there).")
    ] = 8192,
) -> None:
    """Compute the configured model's vectors for every document that lacks them."""
    from nodes.describing import plural

    common.checked_backend(backend)
    overrides: dict[str, dict[str, str]] = {}
    if search := {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}:
        overrides["search"] = search
    if device is not None:
        overrides["embeddings"] = {"device": device}
    settings = settings_for(**overrides)
    try:
        report = run_embed(settings, batch_size=batch_size, commit_every=commit_every)
    except KeyboardInterrupt:
        fail("interrupted; run the same command again to resume from the last commit", 130)
    earlier = f" ({report.earlier:,} more by earlier runs)" if report.earlier else ""
    err.print(
        f"embedded {plural(report.embedded, 'document')}{earlier} into "
        f"{settings.search.backend}:{settings.search.index} ({report.docs_per_s:,.0f} docs/s)",
        markup=False,
    )
    from graphs.cli.index import refresh_dense_stage

    refresh_dense_stage(settings)


def run_embed(settings: Settings, *, batch_size: int, commit_every: int) -> EmbedReport:
    """Embed the configured index's documents that lack vectors; a re-run resumes."""
    from infra.embeddings import HuggingFaceEmbedder
    from infra.ingest.embed_job import EmbedJournal, embed_missing
    from infra.search.backends import index_exists, journal_path, open_writer

    index = settings.search.index
    if not index_exists(settings):
        raise CliError(
            f"index {index!r} does not exist; build it with "
            f"`quorum index FILE... --index {index} --no-embeddings`, then embed it"
        )
    embedder = HuggingFaceEmbedder(settings.embeddings)
    writer = open_writer(settings, None)  # documents as they are: only vectors are added
    ingest = journal_path(settings, writer)
    journal = EmbedJournal(ingest.with_name(f"embed-{ingest.name}"), embedder.name)
    try:
        stored = writer.vectors_model()
        if stored and stored != embedder.name:
            err.print(
                f"index {index!r} holds {stored} vectors: computing {embedder.name}'s beside "
                "them (searches use the old ones until every document has a new one)",
                markup=False,
            )
        total = writer.count_unembedded()
        bar = tqdm(total=total, unit=" docs", file=sys.stderr, dynamic_ncols=True, disable=None)
        done = [0]

        def progress(docs: int) -> None:
            done[0] += docs
            bar.update(docs)

        def describe() -> str:
            return f"embedding: {done[0]:,} of {total:,} documents"

        try:
            with Heartbeat(describe):
                return embed_missing(
                    writer,
                    embedder,
                    journal,
                    batch_size=batch_size,
                    commit_every=commit_every,
                    on_progress=progress,
                )
        except ValueError as exc:  # vectors Elasticsearch did not store
            raise CliError(f"{exc}; run the same command again to retry them") from None
        finally:
            bar.close()
    finally:
        writer.close()
