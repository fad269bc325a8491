"""`quorum ask`: one question answered from the configured corpus, progress on stderr."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from graphs.cli.common import (
    ApiKeyEnvOption,
    BackendOption,
    IndexOption,
    ModelOption,
    PresetOption,
    TypeOption,
    answering_settings,
    checked_type,
    demo_notice,
    err,
    fail,
    out,
    role_notice,
    write_json,
)
from graphs.cli.interrupts import Interrupts
from graphs.live import LiveStatus

if TYPE_CHECKING:
    from nodes.state import QAState, Result


def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    index_name: IndexOption = None,
    backend: BackendOption = None,
    qtype: TypeOption = None,
    model: ModelOption = None,
    api_key_env: ApiKeyEnvOption = None,
    preset: PresetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Answer a question from the configured corpus."""
    from graphs.inputs import check_question

    question = check_question(question)
    qtype = checked_type(qtype)
    settings = answering_settings(index_name, backend, model, api_key_env, preset)
    from graphs.describe import LABELS, progress_line

    # models and index: after the checks
    from graphs.runtime import Progress, build_context, run_question

    demo_notice(settings)
    role_notice(settings)
    with LiveStatus(err, "loading models and index…") as status:
        try:
            context = build_context(settings)
        except KeyboardInterrupt:  # before any question: nothing to finish, nothing written
            fail("interrupted while loading models and index; nothing was asked", 130)

        def started(node: str) -> None:
            status.update(f"{LABELS.get(node, node)}…")

        def finished(node: str, update: QAState) -> None:
            status.print(f"[dim]{escape(progress_line(node, update))}[/dim]")

        async def answer() -> tuple[Result, bool]:
            with Interrupts("the step in flight") as interrupts:
                thread, result = await run_question(
                    settings,
                    question,
                    qtype,
                    context=context,
                    # A first Ctrl-C: no further node starts (no synthesis, no fallback).
                    progress=Progress(
                        on_start=started, on_event=finished, stop=lambda: interrupts.stopping
                    ),
                )
            return result | {"thread_id": thread}, interrupts.stopping

        result, stopped = asyncio.run(answer())
    if stopped and "type" not in result:  # no finalized result: never a half-made answer
        fail(f"stopped; nothing was answered (thread {result['thread_id']})", 130)
    # No model answering anything usable is an error (a server down, a key refused, junk):
    # nothing is printed as an answer, exit 1 naming the endpoint, the role and what it said.
    # Insufficient evidence is an honest answer: 0.
    from nodes.records import model_failed

    if model_failed(result):
        fail(f"no answer: {result['insufficient_reason']} (thread {result['thread_id']})", 1)
    if as_json:
        write_json(answer_json(result))
    else:
        _print_answer(result)


ANSWER_KEYS = (
    "question",
    "type",
    "exact_answer",
    "ideal_answer",
    "insufficient",
    "insufficient_reason",
    "confidence",
    "model_confidence",
    "confidence_parts",
    "support",
    "evidence",
    "documents",
    "snippets",
    "titles",
    "relevance",
    "thread_id",
)
"""What `ask --json` prints, in this order; `insufficient` is always true or false."""


def answer_json(result: Result) -> dict[str, Any]:
    """Return the one JSON object `ask --json` prints for a result."""
    shown = {k: result.get(k) for k in ANSWER_KEYS}
    shown["insufficient"] = bool(result.get("insufficient"))
    shown["evidence"] = result.get("evidence") or []
    return shown


def _print_answer(result: Result) -> None:
    from graphs.describe import answer_lines

    for line in answer_lines(result):
        out.print(line, markup=False, highlight=False)
    out.print(
        f"[dim]thread {result['thread_id']} — every step: "
        f"quorum trace show {result['thread_id']}[/dim]"
    )
