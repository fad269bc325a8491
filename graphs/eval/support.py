"""`quorum eval support`: how often the support check refuses gold, and accepts another answer.

For every golden question of the files given, pooled and by type, with its gold snippets as
the cited evidence (one passage per document, as phase B reads them):

- false refusal: the question's own gold exact answer (a summary: its gold ideal answer; yes/no:
  the gold answer with the gold ideal answer's prose) is refused;
- swap refusal: the gold exact answer of the next question of the same type, in file order
  (cyclic), is refused against these snippets. For yes/no the swap is the gold answer flipped
  beside the gold prose: the model-free check refuses only a 'yes' whose prose negates the
  question's words; the rest is the verifier's to judge.

The check is the product's own (infra/support.py, and the verifier when one is configured), so
the figures are what a user's gold measures of the answers quorum gives.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from infra.bioasq.contract import contradiction
from infra.bioasq.formats import Question
from infra.models import ModelPool
from infra.settings import Settings
from infra.support import check_support
from nodes.given_evidence import contexts_from_snippets
from nodes.state import Passage
from nodes.synthesize.verify import verifier_enabled, verify_answer

QUESTION_TYPES = ("yesno", "factoid", "list", "summary")
_LEAD = re.compile(r"^\W*(?:yes|no)\b\W*", re.IGNORECASE)

Verifier = Callable[[str, str, list[str], str, list[dict[str, Any]]], Awaitable[bool]]
"""(question, qtype, exact, ideal, passages) -> supported: the verifier as the evaluation asks."""


def verifier_for(settings: Settings) -> Verifier | None:
    """Return the configured verifier as the evaluation asks it; None when it is off."""
    if not verifier_enabled(settings):
        return None
    model = ModelPool(settings).first("verify")

    async def ask(
        question: str, qtype: str, exact: list[str], ideal: str, passages: list[dict[str, Any]]
    ) -> bool:
        verification, _ = await verify_answer(
            model,
            question,
            qtype,
            exact,
            ideal,
            cast(list[Passage], passages),
            authors=(),  # the organizers wrote these answers: no model judges its own
        )
        # A verifier that could not be asked leaves the model-free verdict standing.
        return verification["status"] != "refused"

    return ask


def gold_items(question: Question) -> list[str]:
    """Return a golden question's exact answer as the items quorum would give.

    A factoid's synonyms are its candidates (any one carried keeps the answer); a list's items
    are its first synonym each, with the item carried when any synonym is (`gold_synonyms`).
    """
    exact = question.exact_answer
    if question.type == "yesno":
        return [str(exact).strip().lower()] if isinstance(exact, str) else []
    if question.type == "summary" or not isinstance(exact, list):
        return []
    out: list[str] = []
    for entry in exact:
        for item in entry if isinstance(entry, list) else [entry]:
            if isinstance(item, str) and item.strip():
                out.append(item.strip())
    return out


def gold_ideal(question: Question) -> str:
    """Return a golden question's first ideal answer."""
    ideal = question.ideal_answer
    if isinstance(ideal, list):
        ideal = next((i for i in ideal if isinstance(i, str) and i.strip()), "")
    return ideal.strip() if isinstance(ideal, str) else ""


def _list_supported(question: Question, passages: list[dict[str, Any]]) -> bool:
    """Tell whether at least one item of a list question is carried (by any of its synonyms)."""
    exact = question.exact_answer if isinstance(question.exact_answer, list) else []
    for entry in exact:
        synonyms = [
            s for s in (entry if isinstance(entry, list) else [entry]) if isinstance(s, str)
        ]
        if synonyms and check_support("list", synonyms, "", passages).verdict == "supported":
            return True
    return False


def refused(question: Question, items: list[str], ideal: str, passages: list[dict]) -> bool:
    """Tell whether the model-free check refuses this answer against these passages.

    The check as quorum runs it on an answer: the contract's yes/no contradiction (a 'yes'
    whose prose negates the question's words), then the support check.
    """
    if (
        question.type == "yesno"
        and items
        and contradiction("yesno", items[0], ideal, question.body)
    ):
        return True
    return check_support(question.type, items, ideal, passages).verdict == "refused"


def _passages(question: Question) -> list[dict[str, Any]]:
    return [dict(p) for p in contexts_from_snippets(question.documents, question.snippets)]


async def evaluate_support(
    questions: Sequence[Question],
    *,
    verifier: Verifier | None = None,
    on_question: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Return the false-refusal and swap-refusal shares by type, model-free and verified."""
    by_type: dict[str, list[Question]] = {t: [] for t in QUESTION_TYPES}
    for q in questions:
        if q.type in by_type and _passages(q):
            by_type[q.type].append(q)
    report: dict[str, Any] = {"questions": sum(len(v) for v in by_type.values()), "by_type": {}}
    verified: dict[str, Any] = {}
    examples: dict[str, list[dict[str, Any]]] = {}
    for qtype, pool in by_type.items():
        if not pool:
            continue
        false = swap = v_false = v_swap = 0
        shown: list[dict[str, Any]] = []
        for i, q in enumerate(pool):
            passages = _passages(q)
            other = pool[(i + 1) % len(pool)]
            own, ideal = gold_items(q), gold_ideal(q)
            if qtype == "summary":
                own_refused = refused(q, [], ideal, passages)
                swap_refused = refused(q, [], gold_ideal(other), passages)
            elif qtype == "yesno":
                # The flipped answer keeps the gold prose less its leading "Yes,"/"No," (which
                # would refuse it on its first word alone): a 'yes' over prose that says no in
                # the question's words contradicts itself; the rest only a verifier can judge.
                flipped = ["no" if own[:1] == ["yes"] else "yes"]
                own_refused = refused(q, own, ideal, passages)
                swap_refused = refused(q, flipped, _LEAD.sub("", ideal), passages)
            elif qtype == "list":
                own_refused = not _list_supported(q, passages)
                swap_refused = not _list_supported(other_as(q, other), passages)
            else:
                own_refused = refused(q, own, "", passages)
                swap_refused = refused(q, gold_items(other), "", passages)
            false += own_refused
            swap += swap_refused
            if own_refused and len(shown) < 5:
                shown.append({"id": q.id, "answer": own[:3] or ideal[:80]})
            if verifier is not None:
                v_own, v_swapped = await _verified(verifier, q, other, own, ideal, passages)
                v_false += own_refused or not v_own
                v_swap += swap_refused or not v_swapped
            if on_question is not None:
                on_question()
        n = len(pool)
        report["by_type"][qtype] = {
            "n": n,
            "false_refusal": round(false / n, 4),
            "swap_refusal": round(swap / n, 4),
        }
        examples[qtype] = shown
        if verifier is not None:
            verified[qtype] = {
                "n": n,
                "false_refusal": round(v_false / n, 4),
                "swap_refusal": round(v_swap / n, 4),
            }
    if verifier is not None:
        report["by_type_verified"] = verified
    report["false_refusal_examples"] = examples
    return report


def other_as(question: Question, other: Question) -> Question:
    """Return `question` holding `other`'s gold exact answer (the swap of a list question)."""
    return Question(
        id=question.id,
        body=question.body,
        type=question.type,
        documents=question.documents,
        snippets=question.snippets,
        exact_answer=other.exact_answer,
        ideal_answer=other.ideal_answer,
    )


async def _verified(
    verifier: Verifier,
    q: Question,
    other: Question,
    own: list[str],
    ideal: str,
    passages: list[dict[str, Any]],
) -> tuple[bool, bool]:
    """Return whether the verifier supports the gold answer, and the swapped one."""
    if q.type == "yesno":
        swapped = ["no" if own[:1] == ["yes"] else "yes"]
        swapped_ideal = ""
    elif q.type == "summary":
        swapped, swapped_ideal = [], gold_ideal(other)
    else:
        swapped, swapped_ideal = gold_items(other)[:5], ""
    own_ok = await verifier(q.body, q.type, own[:5], ideal, passages)
    swap_ok = await verifier(q.body, q.type, swapped, swapped_ideal, passages)
    return own_ok, swap_ok
