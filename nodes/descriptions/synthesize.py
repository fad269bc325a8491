"""How synthesize is described: each attempt, its temperature, confidence and answer."""

from __future__ import annotations

from typing import Any

from nodes.describing import NodeDescription, Outcome, confidence_text, describes
from nodes.records import JUDGES, SupportRecord, Verification, verified_label
from nodes.trace_view import Block, Lines, Table

COVERS = frozenset({"attempts", "answer", "relevance"})
"""The update's keys these blocks show (the rest is shown as it is)."""
STAND_IN_LINE = "  the ensemble's decision stands in; the answer and support below are its"


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
    if recited := support.get("recited"):
        lines.append(
            f"    re-cited from PMID {', '.join(recited['from'])} to {', '.join(recited['to'])}"
        )
    for carried in support.get("carriers") or []:
        lines.append(
            f"    {carried['answer']!r} in {carried['pmid']} ({carried['how']}): "
            f"{carried['sentence']}"
        )
    if verified := support.get("verified"):
        lines += [f"    {line}" for line in verification_lines(verified)]
    return lines


def relevance_table(relevance: dict[str, Any]) -> Table:
    """Return each judged passage's relevance: the verdict and the signals that decided it."""
    rows = tuple(
        (
            pmid,
            "yes" if r.get("relevant") else "NO",
            f"{r.get('terms', 0.0):.0%}",
            "-" if r.get("cosine") is None else f"{r['cosine']:.2f}",
            "-" if r.get("cross_encoder") is None else f"{r['cross_encoder']:.2f}",
            ", ".join((r.get("missing") or [])[:6]),
        )
        for pmid, r in relevance.items()
    )
    on = sum(bool(r.get("relevant")) for r in relevance.values())
    title = f"relevance: {on} of {len(rows)} passages address the question (only they are evidence)"
    header = ("PMID", "on the question", "key terms held", "cosine", "cross-encoder", "lacks")
    return Table(title, header, rows, frozenset({2, 3, 4}))


def synthesize_trace(update: dict[str, Any]) -> list[Block]:
    """Return the relevance verdicts it made, then one block of lines per synthesis attempt."""
    blocks: list[Block] = []
    if update.get("relevance"):
        blocks.append(relevance_table(update["relevance"]))
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
        if attempt.get("error") and answer.get("source") == "vote":
            # The attempt's own reply was refused; what follows is the stand-in's, and so is
            # the support verdict under it: said so, or "supported" reads as the refused reply's.
            lines.append(f"  synthesis failed: {attempt['error']}")
            lines.append(STAND_IN_LINE)
        elif attempt.get("error"):
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


def verification_lines(verification: Verification) -> list[str]:
    """Return the verification as trace lines: the status, who judged, why, each verdict."""
    judge = f", judged by {JUDGES[j]}" if (j := verification.get("judge")) in JUDGES else ""
    lines = [f"verified: {verified_label(verification)}{judge} ({verification['why']})"]
    for v in verification["passages"]:
        if v.get("flagged"):
            lines.append(f"  {v['pmid']} not shown: it addresses the model, {v['flagged']}")
            continue
        kept = f" ({v['why_not']}: unrelated)" if v.get("why_not") else ""
        if not kept and v["quote"] and not v["quoted"]:
            kept = " (quote not in the passage: unrelated)"
        quote = f': "{v["quote"]}"' if v["quote"] else ""
        lines.append(f"  {v['pmid']} {v['verdict']}{kept}{quote}")
    return lines


def _synthesis_done(update: dict[str, Any]) -> str:
    answer = update.get("answer") or {}
    confidence = confidence_text(answer)
    if answer.get("failed"):
        return f"synthesis failed, trying again: {answer['failed'][:120]}"
    if answer.get("source") == "insufficient":
        return f"insufficient evidence: {str(answer.get('insufficient', ''))[:120]}"
    if answer.get("source") == "vote":
        return f"synthesis failed again; the ensemble's decision stands in: {confidence}"
    return f"synthesized: confidence {confidence}"


def _synthesis_outcome(update: dict[str, Any]) -> Outcome:
    answer = update.get("answer") or {}
    if answer.get("failed") or answer.get("source") in ("vote", "insufficient"):
        return "failed"  # tried again, stood in for, or no answer the evidence carries
    return "done"


describes(
    "synthesize",
    NodeDescription(
        "synthesizing",
        done=_synthesis_done,
        outcome=_synthesis_outcome,
        summary=lambda update: (
            [f"confidence {confidence_text(answer)}"] if (answer := update.get("answer")) else []
        ),
        trace=synthesize_trace,
        covers=COVERS,
    ),
)
