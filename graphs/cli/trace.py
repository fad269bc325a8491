"""`quorum trace …`: runs read back from their checkpoints."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from graphs.cli.common import CliError, err, out, settings_for, write_json
from infra.text import clip

if TYPE_CHECKING:
    from graphs.traces.read import Step

trace_app = typer.Typer(no_args_is_help=True, help="Read runs back from their checkpoints.")


def _steps(settings: Any, thread_id: str) -> list[Step]:
    from graphs.traces.read import UnknownThread, node_updates

    try:
        return node_updates(settings, thread_id)
    except UnknownThread as exc:
        raise CliError(str(exc)) from None


def _clip(text: str | None, width: int) -> str:
    return clip(" ".join((text or "").split()), width)


@trace_app.command("list")
def trace_list(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs to show.")] = 20,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of run summaries.")
    ] = False,
) -> None:
    """List recent runs, newest first: question, status, answer, calls, tokens, wall time."""
    from graphs.traces.read import list_threads

    settings = settings_for()
    threads = list_threads(settings, limit=limit)
    if as_json:
        write_json(threads)
        return
    if not threads:
        out.print(f"No runs recorded in {settings.checkpoint_path} yet: `quorum ask` makes one.")
        return
    width = max(len(t["thread_id"]) for t in threads)
    out.print(
        f"{'thread':<{width}}  {'started':<16}  {'status':<11}  {'calls':>5}  {'tokens':>8}  "
        f"{'wall':>7}  question → answer",
        style="bold",
        markup=False,
    )
    for t in threads:
        started = (
            datetime.fromisoformat(t["started"]).astimezone().strftime("%Y-%m-%d %H:%M")
            if t["started"]
            else "?"
        )
        wall = f"{t['seconds']:.1f}s" if t["seconds"] is not None else "-"
        answer = f" → {_clip(t['answer'], 40)}" if t["answer"] else ""
        if t["status"] == "failed" and t.get("error"):
            answer = f" ✗ {_clip(t['error'], 60)}"
        out.print(
            f"{t['thread_id']:<{width}}  {started:<16}  {t['status']:<11}  {t['calls']:>5}  "
            f"{t['tokens']:>8,}  {wall:>7}  {_clip(t['question'], 60)}{answer}",
            markup=False,
            highlight=False,
        )


@trace_app.command("show")
def trace_show(
    thread_id: Annotated[str, typer.Argument(help="The thread id `quorum ask` printed.")],
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            help="Only this node's steps, with every model call's prompt and raw output.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print a JSON list of {node, update}; with --node, of {node, step, started, "
            "seconds, update, calls}.",
        ),
    ] = False,
) -> None:
    """Show a run's nodes in execution order with each node's state update."""
    from graphs.describe import block_lines, call_view, node_names, step_lines

    if node is not None and node not in node_names():
        raise CliError(f"unknown node {node!r}; the graph's nodes: {', '.join(node_names())}")
    steps = _steps(settings_for(), thread_id)
    if node is not None:
        steps = [s for s in steps if s["node"] == node]
        if not steps:
            err.print(f"{node} did not run in thread {thread_id}", markup=False)
    if as_json:
        if node is None:
            write_json([{"node": s["node"], "update": s["update"]} for s in steps])
        else:
            write_json([_with_calls(s) for s in steps])
        return
    for s in steps:
        took = f" {s['seconds']:.2f}s" if s["seconds"] is not None else ""
        out.print(f"[bold]{s['step']:>2} {s['node']}[/bold][dim]{took}[/dim]")
        skip = ("calls",) if node is not None else ()
        for line in step_lines(s["node"], s["update"], width=300, skip=skip):
            out.print(f"    {line}", markup=False, highlight=False)
        if node is None:
            continue
        calls = s["update"].get("calls") or []
        for number, call in enumerate(calls, 1):
            first, *rest = block_lines(call_view(call, label=f"call {number}/{len(calls)}"))
            out.print(f"    {first}", style="bold", markup=False)
            for line in rest:
                out.print(f"      {line}", markup=False, highlight=False)


def _with_calls(step: Step) -> dict[str, Any]:
    update = {k: v for k, v in step["update"].items() if k != "calls"}
    return {
        "node": step["node"],
        "step": step["step"],
        "started": step["started"],
        "seconds": step["seconds"],
        "update": update,
        "calls": step["update"].get("calls") or [],
    }


@trace_app.command("export")
def trace_export(
    thread_id: Annotated[str, typer.Argument(help="The thread id `quorum ask` printed.")],
    html: Annotated[
        Path,
        typer.Option(
            "--html",
            dir_okay=False,
            help="Write one self-contained HTML page here (timeline, prompts and outputs, "
            "relation graph, votes, costs).",
        ),
    ],
) -> None:
    """Export a run's trace as a single HTML file that opens offline in any browser."""
    from graphs.traces.export import export_html
    from graphs.traces.read import thread_question
    from infra.files import check_target, write_atomic

    check_target(html, what="--html")  # a device or FIFO is never replaced by the page
    settings = settings_for()
    steps = _steps(settings, thread_id)
    question = thread_question(settings, thread_id)
    page = export_html(steps, thread_id=thread_id, question=question)
    write_atomic(html, page, what="--html")
    err.print(f"wrote {html} ({len(page.encode()) / 1024:,.0f} KiB)", markup=False)


@trace_app.command("replay")
def trace_replay(
    thread_id: Annotated[str, typer.Argument(help="The finished run to replay.")],
    from_node: Annotated[str, typer.Option("--from", help="Node to run again from.")],
    edits: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE to change in the state first (JSON or text)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Fork a run at a node into a new thread and run it to the end; the original stays."""
    import asyncio

    from graphs.runtime import build_context
    from graphs.traces.control import parse_edits, replay

    changes = parse_edits(edits or [])
    settings = settings_for()
    with err.status(f"replaying {thread_id} from {from_node}…"):
        new_thread, result = asyncio.run(
            replay(settings, build_context(settings), thread_id, from_node, changes)
        )
    if as_json:
        write_json({"thread_id": new_thread, "replay_of": thread_id, "result": result})
        return
    exact = result.get("exact_answer")
    out.print(f"[bold]{json.dumps(exact, ensure_ascii=False)}[/bold]")
    if result.get("ideal_answer"):
        out.print(result["ideal_answer"], markup=False)
    out.print(f"[dim]new thread {new_thread} — quorum trace show {new_thread}[/dim]")


@trace_app.command("step")
def trace_step(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
) -> None:
    """Run a question one node at a time: continue, skip to the end, edit a field, or quit."""
    import asyncio

    from graphs.inputs import check_question
    from graphs.traces.control import EDITABLE, parse_edits, step_through

    question = check_question(question)
    settings = settings_for()
    from graphs.runtime import build_context

    shown: dict[str, Any] = {}

    async def decide(node: str, state: dict[str, Any]) -> tuple[str, Any]:
        changed = {k: v for k, v in state.items() if shown.get(k) != v and k != "calls"}
        shown.clear()
        shown.update(state)
        for key, value in changed.items():
            text = json.dumps(value, ensure_ascii=False, default=str)
            out.print(f"    {key}: {_clip(text, 200)}", markup=False, highlight=False)
        out.print(f"[bold]next: {node}[/bold]")
        while True:
            answer = typer.prompt(
                "[c]ontinue, [s]kip to the end, [e]dit KEY=VALUE, [q]uit", default="c"
            ).strip()
            if answer in ("c", ""):
                return "continue", None
            if answer in ("s", "q"):
                return ("skip" if answer == "s" else "quit"), None
            if answer.startswith("e"):
                try:
                    return "edit", parse_edits([answer[1:].strip()])
                except ValueError as exc:
                    err.print(f"[red]{exc}[/red] (fields: {', '.join(sorted(EDITABLE))})")
                    continue
            err.print("[red]c, s, e KEY=VALUE or q[/red]")

    thread_id, result, ran = asyncio.run(
        step_through(settings, build_context(settings), question, decide)
    )
    if result is not None:
        out.print(f"[bold]{json.dumps(result.get('exact_answer'), ensure_ascii=False)}[/bold]")
        if result.get("ideal_answer"):
            out.print(result["ideal_answer"], markup=False)
    out.print(f"[dim]ran {', '.join(ran) or 'nothing'} — quorum trace show {thread_id}[/dim]")
