"""`quorum trace …`: runs read back from their checkpoints."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from graphs.cli_common import CliError, out, settings_for

trace_app = typer.Typer(no_args_is_help=True, help="Read runs back from their checkpoints.")


@trace_app.command("show")
def trace_show(
    thread_id: Annotated[str, typer.Argument(help="The thread id `quorum ask` printed.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of {node, update}.")
    ] = False,
) -> None:
    """Show a run's nodes in execution order with each node's state update."""
    from graphs.traces import DESCRIBERS, UnknownThread, node_updates

    try:
        steps = node_updates(settings_for(), thread_id)
    except UnknownThread as exc:
        raise CliError(str(exc)) from None
    if as_json:
        sys.stdout.write(
            json.dumps(
                [{"node": s["node"], "update": s["update"]} for s in steps],
                ensure_ascii=False,
                default=str,
            )
            + "\n"
        )
        return
    for s in steps:
        took = f" {s['seconds']:.2f}s" if s["seconds"] is not None else ""
        out.print(f"[bold]{s['step']:>2} {s['node']}[/bold][dim]{took}[/dim]")
        describe, shown = DESCRIBERS.get(s["node"], (None, frozenset()))
        if describe is not None:
            for line in describe(s["update"]):
                out.print(f"    {line}", markup=False, highlight=False)
        for key, value in s["update"].items():
            if key in shown:
                continue
            text = json.dumps(value, ensure_ascii=False, default=str)
            out.print(f"    {key}: {text if len(text) <= 300 else text[:300] + '…'}")
