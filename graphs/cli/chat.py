"""`quorum chat`: a conversation with the corpus in the terminal."""

from __future__ import annotations

from typing import Annotated

import typer

from graphs.cli.common import (
    CliError,
    demo_notice,
    err,
    search_options,
    settings_for,
)
from graphs.cli.live import LiveStatus
from infra.bioasq.types import QUESTION_TYPES


def chat(
    index_name: Annotated[
        str | None, typer.Option("--index", help="Index to chat over (default: settings).")
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", help="Search backend (default: settings).")
    ] = None,
    qtype: Annotated[
        str | None,
        typer.Option("--type", help="Answer every turn as yesno, factoid, list or summary."),
    ] = None,
) -> None:
    """Chat with the corpus: follow-ups, /open PMID, /trace, /new, /quit."""
    from rich.console import Console

    if qtype is not None and qtype not in QUESTION_TYPES:
        raise CliError(f"unknown --type {qtype!r}; choose one of {', '.join(QUESTION_TYPES)}")
    settings = settings_for(**search_options(index_name, backend))
    demo_notice(settings)
    from graphs.chat.terminal import run_chat
    from graphs.runtime import build_context

    with LiveStatus(err, "loading models and index…"):
        context = build_context(settings)
    console = Console()
    run_chat(settings, context, console, lambda: console.input("[bold]you>[/bold] "), qtype)
