"""Whether an answer is given, and why not: the one decision of "insufficient".

The rule step (nodes/synthesize/rule.py), the support check's gate on synthesis's answer
(nodes/synthesize/support.py), finalize and `bioasq run` ask `why_unanswered`; none of them
decides on its own. What counts as an answer at all is the contract (infra/bioasq/contract.py);
this adds what a run knows beside the answer's words: that no ensemble member answered, that
an earlier gate already said why not, or that the support check already held the answer to the
contract (its first check), so that each answer meets the contract once. docs/methods.md lists
the gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.bioasq.contract import answer_problem, insufficient_answer
from nodes.state import Answer, Member

RULE_STEP = ("decision", "vote")
"""An Answer's `source` when the rule step made it (rule_answer held it to the contract)."""


def why_unanswered(
    qtype: str,
    question: str,
    exact: Any,
    ideal: Any,
    *,
    said: str | None = None,
    members: Sequence[Member] = (),
    verdict: str | None = None,
    failed: str | None = None,
) -> str | None:
    """Return why no answer is given, or None when this one is.

    Args:
        qtype: The question type.
        question: The question: a 'yes' whose prose negates its words contradicts itself.
        exact: The exact answer in BioASQ's shape (infra.bioasq.exact_answer_shape).
        ideal: The ideal answer.
        said: Why an earlier gate found no answer (an Answer's `insufficient`, a Result's
            `insufficient_reason`): it stands.
        members: The ensemble's members, when it ran: none answering means no answer, whatever
            synthesis made of it.
        verdict: The support check's verdict on this answer, when it ran ("supported",
            "refused"): its first check is the contract, so a checked answer is not held to it
            again, and a refused one is no answer.
        failed: Why the last synthesis attempt failed: said beside what broke.
    """
    if members and not any(m.get("error") is None and m.get("answer") for m in members):
        errors = [m["error"] for m in members if m.get("error")]
        last = f" (last error: {errors[-1][:300]})" if errors else ""
        return f"no ensemble member gave a usable answer from the evidence found{last}"
    if said is not None:
        return said
    if verdict == "refused":
        return failed or "the support check refused the answer"
    if verdict is not None:
        return None
    problem = answer_problem(qtype, exact, ideal, question=question)
    if problem is None:
        return None
    return f"{problem} ({failed})" if failed else problem


def insufficient(reason: str, rationale: str) -> Answer:
    """Return the answer that says the evidence is insufficient, and why: no exact answer."""
    return {
        "exact": [],
        "ideal": insufficient_answer(reason),
        "confidence": 0.0,
        "cited": [],
        "source": "insufficient",
        "insufficient": reason,
        "rationale": rationale,
    }
