"""`quorum ask`: one question answered from the configured corpus, progress on stderr."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.markup import escape

from graphs.cli.common import (
    BackendOption,
    IndexOption,
    TypeOption,
    checked_type,
    demo_notice,
    err,
    fail,
    out,
    search_options,
    settings_for,
    write_json,
)
from graphs.cli.live import LiveStatus
from nodes.state import QAState


def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    index_name: IndexOption = None,
    backend: BackendOption = None,
    qtype: TypeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Answer a question from the configured corpus."""
    from graphs.inputs import check_question

    question = check_question(question)
    qtype = checked_type(qtype)
    settings = settings_for(**search_options(index_name, backend))
    from graphs.describe import LABELS, done_line
    from graphs.runtime import build_context, run_question  # models and index: after the checks

    demo_notice(settings)
    with LiveStatus(err, "loading models and index…") as status:
        context = build_context(settings)

        def started(node: str) -> None:
            status.update(f"{LABELS.get(node, node)}…")

        def finished(node: str, update: QAState) -> None:
            status.print(f"[dim]✓ {escape(done_line(node, update))}[/dim]")

        _, result = asyncio.run(
            run_question(
                settings, question, qtype, context=context, on_start=started, on_event=finished
            )
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
    else:
        _print_answer(result)
    if result.get("insufficient"):
        # Every model failed (or none answered): not a result, so not exit 0.
        fail(f"no answer: {result.get('insufficient_reason')}", 1)


def _print_answer(result: dict[str, Any]) -> None:
    exact = result.get("exact_answer")
    if isinstance(exact, list):
        exact = "; ".join(item[0] for item in exact if item) or "(none)"
    if exact is not None:
        out.print(f"[bold]Exact answer[/bold] ({result['type']}): {escape(str(exact))}")
    if result.get("ideal_answer"):
        label = "Ideal answer" if exact is not None else f"Ideal answer ({result['type']})"
        out.print(f"[bold]{label}[/bold]: {escape(result['ideal_answer'])}")
    out.print(f"[bold]Confidence[/bold]: {result.get('confidence', 0):.2f}")
    titles = result.get("titles", {})
    if result.get("documents"):
        out.print("[bold]Documents[/bold] (best first):")
        for pmid in result["documents"]:
            out.print(f"  [{pmid}] {titles.get(pmid, '')}", markup=False)
    out.print(
        f"[dim]thread {result['thread_id']} — every step: "
        f"quorum trace show {result['thread_id']}[/dim]"
    )
