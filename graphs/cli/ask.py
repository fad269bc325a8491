"""`quorum ask`: one question answered from the configured corpus, progress on stderr."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from graphs.cli.common import CliError, demo_notice, err, out, settings_for, write_json
from infra.bioasq.types import QUESTION_TYPES
from nodes.state import QAState


def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    qtype: Annotated[
        str | None,
        typer.Option("--type", help="yesno, factoid, list or summary (detected when omitted)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Answer a question from the configured corpus."""
    from graphs.inputs import check_question

    question = check_question(question)
    if qtype is not None and qtype not in QUESTION_TYPES:
        raise CliError(f"unknown --type {qtype!r}; choose one of {', '.join(QUESTION_TYPES)}")
    settings = settings_for()
    from graphs.describe import LABELS, first_node, next_label
    from graphs.runtime import build_context, run_question  # models and index: after the checks

    demo_notice(settings)
    with err.status("loading models and index…") as status:
        context = build_context(settings)

        def progress(node: str, update: QAState) -> None:
            detail = ""
            if node == "search" and "hits" in update:
                detail = f" ({update['hits']:,} hits)"
            err.print(f"[dim]✓ {LABELS.get(node, node)}{detail}[/dim]")
            status.update(f"{next_label(node)}…")

        status.update(f"{LABELS[first_node()]}…")
        _, result = asyncio.run(
            run_question(settings, question, qtype, context=context, on_event=progress)
        )
    if as_json:
        keys = (
            "question",
            "type",
            "exact_answer",
            "ideal_answer",
            "confidence",
            "documents",
            "snippets",
            "thread_id",
        )
        write_json({k: result.get(k) for k in keys})
        return
    _print_answer(result)


def _print_answer(result: dict[str, Any]) -> None:
    exact = result.get("exact_answer")
    if isinstance(exact, list):
        exact = "; ".join(item[0] for item in exact if item) or "(none)"
    out.print(
        f"[bold]Answer[/bold] ({result['type']}): {exact if exact is not None else '(summary)'}"
    )
    out.print(f"[bold]Confidence[/bold]: {result.get('confidence', 0):.2f}")
    if result.get("ideal_answer"):
        out.print(result["ideal_answer"])
    titles = result.get("titles", {})
    if result.get("documents"):
        out.print("[bold]Documents[/bold] (best first):")
        for pmid in result["documents"][:5]:
            out.print(f"  [{pmid}] {titles.get(pmid, '')}")
    out.print(
        f"[dim]thread {result['thread_id']} — every step: "
        f"quorum trace show {result['thread_id']}[/dim]"
    )
