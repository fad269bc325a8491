"""What synthesize shows in a trace: each attempt, its temperature, confidence and answer."""

from __future__ import annotations

from typing import Any

from nodes.describing import confidence_text
from nodes.records import SupportRecord
from nodes.synthesize.verify import verification_lines
from nodes.trace_view import Block, Lines

COVERS = frozenset({"attempts", "answer"})
"""The update's keys these blocks show (the rest is shown as it is)."""


def support_lines(support: SupportRecord | None) -> list[str]:
    """Return the support check's verdicts: checks, carriers, the verifier's reading."""
    if not support:
        return []
    lines = [
        f"  support: {support['verdict']}"
        + (f" ({support['reason']})" if support.get("reason") else "")
    ]
    for check in support.get("checks") or []:
        mark = "ok" if check["passed"] else "FAILED"
        lines.append(f"    {check['check']} {mark}: {check['detail']}")
    for carried in support.get("carriers") or []:
        lines.append(
            f"    {carried['answer']!r} in {carried['pmid']} ({carried['how']}): "
            f"{carried['sentence']}"
        )
    if verified := support.get("verified"):
        lines += [f"    {line}" for line in verification_lines(verified)]
    return lines


def synthesize_trace(update: dict[str, Any]) -> list[Block]:
    """Return one block of lines per synthesis attempt."""
    blocks: list[Block] = []
    for attempt in update.get("attempts", []):
        answer = attempt.get("answer") or {}
        if answer.get("source") == "decision":
            head = "the decision is final (synthesis.mode vote, no model call)"
        else:
            again = " (again, at temperature 0)" if attempt["temperature"] == 0 else ""
            head = f"at temperature {attempt['temperature']:g}{again}"
        lines = [
            f"attempt in round {attempt['round']} {head}: confidence "
            f"{confidence_text(answer)}, answer from {answer.get('source')}"
        ]
        if attempt.get("error"):
            lines.append(f"  error: {attempt['error']}")
        if answer.get("overrode_decision"):
            lines.append("  overrode the ensemble's decision")
        if answer.get("extracted") and answer.get("extracted") != answer.get("exact"):
            lines.append(f"  extracted: {'; '.join(answer['extracted'])}")
        lines.append(f"  exact: {'; '.join(answer.get('exact') or []) or '-'}")
        lines.append(f"  ideal: {answer.get('ideal') or '-'}")
        if answer.get("rationale"):
            lines.append(f"  rationale: {answer['rationale']}")
        if answer.get("cited"):
            lines.append(f"  cites: {', '.join(answer['cited'])}")
        lines += support_lines(answer.get("support"))
        blocks.append(Lines(tuple(lines)))
    return blocks
