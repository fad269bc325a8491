"""`quorum embed`: vectors for every document of an index that lacks them, resumable.

The work is the ingest session's (infra/ingest/session.py); here the arguments, the progress
shown and the summary line.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer
from tqdm import tqdm

from graphs.cli import common
from graphs.cli.common import err, fail, settings_for
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
        report = _embedded(settings, batch_size=batch_size, commit_every=commit_every)
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


def _embedded(settings: Settings, *, batch_size: int, commit_every: int) -> EmbedReport:
    """Embed through an ingest session: a bar on a terminal, heartbeat lines elsewhere."""
    from infra.ingest.session import IngestSession

    with IngestSession(settings) as session:
        total = session.open_vectors(on_note=lambda line: err.print(line, markup=False))
        bar = tqdm(total=total, unit=" docs", file=sys.stderr, dynamic_ncols=True, disable=None)
        done = [0]

        def progress(docs: int) -> None:
            done[0] += docs
            bar.update(docs)

        def describe() -> str:
            return f"embedding: {done[0]:,} of {total:,} documents"

        try:
            with Heartbeat(describe):
                return session.embed(
                    batch_size=batch_size, commit_every=commit_every, on_progress=progress
                )
        finally:
            bar.close()
