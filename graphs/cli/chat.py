"""`quorum chat`: a conversation with the corpus in the terminal."""

from __future__ import annotations

from typing import Annotated

import typer

from graphs.cli.common import demo_notice, err, settings_for


def chat(
    index_name: Annotated[
        str | None, typer.Option("--index", help="Index to chat over (default: settings).")
    ] = None,
) -> None:
    """Chat with the corpus: follow-ups, /open PMID, /trace, /new, /quit."""
    from rich.console import Console

    settings = settings_for(search={"index": index_name}) if index_name else settings_for()
    demo_notice(settings)
    from graphs.chat.terminal import run_chat
    from graphs.runtime import build_context

    with err.status("loading models and index…"):
        context = build_context(settings)
    console = Console()
    run_chat(settings, context, console, lambda: console.input("[bold]you>[/bold] "))
