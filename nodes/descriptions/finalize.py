"""How finalize: the answer as `ask` prints it, or why there is none."""

from __future__ import annotations

from typing import Any

from nodes.answer_view import answer_view
from nodes.describing import NodeDescription, describes
from nodes.records import model_failed

READY = "answer ready"


def _finalize_done(update: dict[str, Any]) -> str:
    result = update.get("result") or {}
    if model_failed(result):
        return "no model gave a usable answer"
    if result.get("insufficient"):
        return "no answer: the evidence found does not carry one"
    return READY


describes(
    "finalize",
    NodeDescription(
        "finalizing",
        done=_finalize_done,
        # A run no model answered (ask exits 1), or whose evidence carries no answer, is never
        # marked ✓ "answer ready": quorum says it cannot answer.
        outcome=lambda update: "failed" if _finalize_done(update) != READY else "done",
        summary=lambda update: (
            [f"{len(result.get('documents') or [])} documents"]
            if (result := update.get("result"))
            else []
        ),
        # The answer as ask prints it; the first ten retrieved documents (`--json`: all).
        trace=lambda update: [answer_view(update["result"], documents=10)],
        covers=frozenset({"result"}),
    ),
)
