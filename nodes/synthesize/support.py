"""The support check, run on every answer before it is given: synthesis's and the stand-in's.

An answer that keeps the contract is given only when the passages it cites carry it:
infra/support.py decides without a model (entities found, prose grounded, debris refused); a
list or factoid answer keeps the items the evidence carries and loses the rest. What the check
found is the answer's `support` record, shown in the trace, the page and the export.
"""

from __future__ import annotations

from collections.abc import Sequence

from infra.support import check_support
from nodes.context import Context
from nodes.state import Answer, Call, Passage
from nodes.synthesize.verify import answer_authors, counted, verifier_enabled, verify_answer

VERIFIER_OFF = "verify.enabled is off for this model (the local demo model cannot judge entailment)"


def cited_passages(answer: Answer, contexts: Sequence[Passage]) -> list[Passage]:
    """Return the passages the answer cites, in its citation order."""
    by_pmid = {c["pmid"]: c for c in contexts}
    return [by_pmid[p] for p in answer.get("cited") or [] if p in by_pmid]


def check_answer(
    qtype: str, answer: Answer, contexts: Sequence[Passage]
) -> tuple[Answer, str | None]:
    """Return the answer as its evidence carries it, and why it is refused (None: supported).

    A factoid or list answer keeps only the items its cited passages carry; the ideal answer's
    prose is held to what those passages say. The record of the check rides on the answer.
    """
    exact = list(answer.get("exact") or [])
    cited = cited_passages(answer, contexts)
    # An answer that cites nothing is held to the passages it was made from: a factoid or
    # list answer then cites the passages found to carry it (where its words stand, never a
    # guess); prose cites nothing and earns the citations' floor (confidence.py).
    found = check_support(qtype, exact, answer.get("ideal") or "", cited or list(contexts))
    record = found.record()
    checked: Answer = {**answer, "support": record}
    if found.verdict == "refused":
        return checked, f"the answer is not supported by its evidence: {found.reason}"
    if qtype in ("factoid", "list"):
        checked["exact"] = [e for e in exact if e in found.kept]
        if not cited:
            checked["cited"] = list(dict.fromkeys(c.pmid for c in found.carriers.values()))
    return checked, None


async def held_to_evidence(
    ctx: Context, question: str, qtype: str, answer: Answer, contexts: Sequence[Passage]
) -> tuple[Answer, str | None, list[Call]]:
    """Return the answer as its evidence carries it, why it is refused, and the verifier's call.

    The model-free check first (it needs no call and refuses most of what is wrong); then, when
    verify.enabled allows, the verifier reads the answer beside the passages it cites, once.
    A verifier that could not be asked leaves the model-free verdict standing, marked so.
    """
    checked, refused = check_answer(qtype, answer, contexts)
    if refused is not None:
        return checked, refused, []
    if not verifier_enabled(ctx.settings):
        checked["support"]["verified"] = {
            "status": "not verified",
            "passages": [],
            "why": VERIFIER_OFF,
        }
        return checked, None, []
    # An answer that cites nothing is read beside the passages it was made from, as the
    # model-free check read it; it then cites those the verifier quotes in its support.
    cited = cited_passages(checked, contexts)
    verification, call = await verify_answer(
        ctx.models.first("verify"),
        question,
        qtype,
        list(checked.get("exact") or []),
        checked.get("ideal") or "",
        cited or list(contexts),
        authors=answer_authors(ctx.models, checked),
    )
    checked["support"]["verified"] = verification
    calls = [call] if call is not None else []
    if verification["status"] == "refused":
        checked["support"]["verdict"] = "refused"
        checked["support"]["reason"] = f"verifier: {verification['why']}"
        return checked, f"the verifier refused the answer: {verification['why']}", calls
    if not cited and verification["status"] == "supported":
        quoted = [v["pmid"] for v in verification["passages"] if counted(v) == "supports"]
        checked["cited"] = list(dict.fromkeys(quoted))
    return checked, None, calls


def support_share(qtype: str, answer: Answer) -> float:
    """Return the share of a list answer's items the evidence carries; 1.0 for other types.

    A factoid answer is its first candidate: the candidates the check dropped were never given,
    and agreement already scores the first one; yes/no and summary have no items to count.
    """
    record = answer.get("support") or {}
    if record.get("verdict") == "refused":
        return 0.0
    kept, dropped = len(record.get("kept") or []), len(record.get("dropped") or [])
    if qtype != "list" or not kept + dropped:
        return 1.0
    return kept / (kept + dropped)
