"""`quorum eval support`: how often the support check refuses gold, and accepts another answer.

For every golden question of the files given, pooled and by type, with its gold snippets as
the cited evidence (one passage per document, as phase B reads them), judged by the very
functions an answer goes through (`judge_relevance`, then `judge_answer`: the contract, the
relevance of each cited passage, the model-free check, and the verifier when one is
configured), never a copy of them:

- false refusal: the question's own gold answer (its exact answer; for yes/no and summary with
  its gold ideal answer) is refused. A gold answer whose ideal answer contradicts its exact one
  is counted apart (`gold_contradictory`), not as a false refusal;
- swap refusal: the gold answer of the next question of the same type, in file order (cyclic),
  is refused against this question and its snippets (for yes/no and summary: that question's
  exact and ideal answer);
- relevance_kept: the share of the question's own gold snippets judged relevant to it;
- relevance_swap_refused: the share of the next same-type question's gold snippets judged not
  relevant to this question.

A snippet is judged as the graph judges it: within its document's passage (the document's
gold snippets joined, as phase B reads them), so each snippet counts its passage's verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.bioasq.contract import ideal_problem
from infra.bioasq.formats import Question
from infra.bioasq.types import QUESTION_TYPES
from infra.bioasq.urls import pmid_of
from infra.embeddings import Embedder
from infra.models import ChatModel, ModelPool
from infra.relevance import judge_relevance
from infra.rerankers import Reranker
from infra.settings import Settings
from nodes.given_evidence import contexts_from_snippets
from nodes.state import Answer, Passage
from nodes.synthesize.support import Judging, judge_answer, record_of
from nodes.synthesize.verify import verifier_enabled

NO_VERIFIER = "no verifier in this evaluation (--no-verify, or verify.enabled is off)"


def verifier_for(settings: Settings) -> ChatModel | None:
    """Return the configured verify model; None when the verifier is off."""
    if not verifier_enabled(settings):
        return None
    return ModelPool(settings).first("verify")


async def support_report(
    settings: Settings, questions: Sequence[Question], *, verify: bool = True
) -> dict[str, Any]:
    """Return `evaluate_support` with this configuration's embedder, cross-encoder and verifier."""
    from infra.embeddings import BackgroundEmbedder
    from infra.rerankers import load_reranker

    return await evaluate_support(
        questions,
        embedder=BackgroundEmbedder(settings.embeddings),
        scorer=load_reranker(settings.rerank.cross_encoder, settings.embeddings.device),
        verifier=verifier_for(settings) if verify else None,
        recite=settings.verify.recite,
    )


def gold_items(question: Question) -> list[str]:
    """Return a golden question's exact answer as the items quorum would give.

    A factoid's synonyms are its candidates (any one carried keeps the answer); a list's
    entries give every synonym as an item, so an entry is carried when any synonym is.
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
    """Return a golden question's first ideal answer that is prose by the contract.

    Golden files list several ideal answers per question, a few of them one or two words
    ("Yes."): quorum gives no such answer, so the first that is a sentence stands for gold.
    """
    ideal = question.ideal_answer
    texts = [
        i.strip() for i in (ideal if isinstance(ideal, list) else [ideal]) if isinstance(i, str)
    ]
    texts = [t for t in texts if t]
    return next((t for t in texts if ideal_problem(t) is None), texts[0] if texts else "")


def gold_answer(question: Question, qtype: str) -> Answer:
    """Return a golden question's answer as quorum would give it, citing nothing.

    Citing nothing, it is held to every passage given, as an answer made from them is.
    """
    return {
        "exact": gold_items(question),
        "ideal": gold_ideal(question),
        "confidence": 0.0,
        "cited": [],
    }


def passages_of(question: Question) -> list[Passage]:
    """Return a golden question's gold snippets as phase B reads them: one passage per document."""
    return contexts_from_snippets(question.documents, question.snippets)


def snippet_counts(question: Question) -> dict[str, int]:
    """Return how many distinct gold snippets each document's passage joins, by PMID."""
    texts: dict[str, set[str]] = {}
    for snippet in question.snippets:
        text = (snippet.get("text") or "").strip()
        try:
            pmid = pmid_of(str(snippet.get("document") or ""))
        except ValueError:
            continue
        if text:
            texts.setdefault(pmid, set()).add(text)
    return {pmid: len(found) for pmid, found in texts.items()}


@dataclass
class _Tally:
    n: int = 0
    false: int = 0
    swap: int = 0
    contradictory: int = 0
    not_prose: int = 0
    kept: list[int] = field(default_factory=lambda: [0, 0])
    swap_refused: list[int] = field(default_factory=lambda: [0, 0])
    v_false: int = 0
    v_swap: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        n = self.n or 1
        return {
            "n": self.n,
            "false_refusal": round(self.false / n, 4),
            "swap_refusal": round(self.swap / n, 4),
            "gold_contradictory": self.contradictory,
            "gold_not_prose": self.not_prose,
            "relevance_kept": round(self.kept[0] / self.kept[1], 4) if self.kept[1] else None,
            "relevance_swap_refused": (
                round(self.swap_refused[0] / self.swap_refused[1], 4)
                if self.swap_refused[1]
                else None
            ),
        }

    def verified_row(self) -> dict[str, Any]:
        n = self.n or 1
        return {
            "n": self.n,
            "false_refusal": round(self.v_false / n, 4),
            "swap_refusal": round(self.v_swap / n, 4),
        }


def _failed_check(answer: Answer) -> str:
    checks = (answer.get("support") or {}).get("checks") or []
    failed = [c["check"] for c in checks if not c.get("passed")]
    return failed[-1] if failed else ""


async def evaluate_support(
    questions: Sequence[Question],
    *,
    embedder: Embedder,
    scorer: Reranker | None = None,
    verifier: ChatModel | None = None,
    recite: bool = True,
    on_question: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Return the false-refusal, swap-refusal and relevance shares by type.

    Model-free (no verifier) always; beside it, with the verifier when one is given.
    """
    by_type: dict[str, list[Question]] = {t: [] for t in QUESTION_TYPES}
    for q in questions:
        if q.type in by_type and passages_of(q):
            by_type[q.type].append(q)
    report: dict[str, Any] = {"questions": sum(len(v) for v in by_type.values()), "by_type": {}}
    verified: dict[str, Any] = {}
    examples: dict[str, list[dict[str, Any]]] = {}
    for qtype, pool in by_type.items():
        if not pool:
            continue
        tally = _Tally(n=len(pool))
        for i, q in enumerate(pool):
            other = pool[(i + 1) % len(pool)]
            await _one(q, other, qtype, tally, embedder, scorer, verifier, recite)
            if on_question is not None:
                on_question()
        report["by_type"][qtype] = tally.row()
        examples[qtype] = tally.examples
        if verifier is not None:
            verified[qtype] = tally.verified_row()
    if verifier is not None:
        report["by_type_verified"] = verified
    report["false_refusal_examples"] = examples
    return report


async def _one(
    q: Question,
    other: Question,
    qtype: str,
    tally: _Tally,
    embedder: Embedder,
    scorer: Reranker | None,
    verifier: ChatModel | None,
    recite: bool,
) -> None:
    """Judge one question's own gold answer and the next one's, and both sets of snippets."""
    passages, theirs = passages_of(q), passages_of(other)
    own_judged = judge_relevance(q.body, passages, embedder, scorer=scorer)
    # Another question's passages, judged against this one (a PMID may be in both).
    other_judged = judge_relevance(
        q.body, [{**p, "pmid": f"other:{p['pmid']}"} for p in theirs], embedder, scorer=scorer
    )
    mine, its = snippet_counts(q), snippet_counts(other)
    for p in passages:
        tally.kept[0] += mine[p["pmid"]] * own_judged[p["pmid"]].relevant
        tally.kept[1] += mine[p["pmid"]]
    for p in theirs:
        tally.swap_refused[0] += its[p["pmid"]] * (not other_judged[f"other:{p['pmid']}"].relevant)
        tally.swap_refused[1] += its[p["pmid"]]
    relevance = {p: record_of(r.record()) for p, r in own_judged.items()}
    own, swapped = gold_answer(q, qtype), gold_answer(other, qtype)
    free = Judging(q.body, relevance, embedder=embedder, unverified=NO_VERIFIER, recite=recite)
    own_checked, own_refused, _ = await judge_answer(free, qtype, own, passages)
    _, swap_refused, _ = await judge_answer(free, qtype, swapped, passages)
    failed = _failed_check(own_checked) if own_refused is not None else ""
    not_prose = failed == "contract" and ideal_problem(own["ideal"]) is not None
    if failed == "contradiction":
        tally.contradictory += 1  # the organizers' own answer says yes and no: reported apart
    elif not_prose:
        tally.not_prose += 1  # its every ideal answer is a word or two ("Yes"): reported apart
    elif own_refused is not None:
        tally.false += 1
        if len(tally.examples) < 5:
            shown = own["exact"][:3] or own["ideal"][:80]
            tally.examples.append({"id": q.id, "answer": shown, "why": own_refused[:200]})
    tally.swap += swap_refused is not None
    if verifier is None:
        return
    # The model-free check refuses first, as it does in the graph: only what it lets through
    # reaches the verifier. The organizers wrote these answers: no model judges its own.
    judged = Judging(
        q.body, relevance, embedder=embedder, verifier=verifier, recite=recite, authors=()
    )
    if own_refused is None:
        _, refused, _ = await judge_answer(judged, qtype, own, passages)
        tally.v_false += refused is not None
    elif failed != "contradiction" and not not_prose:
        tally.v_false += 1
    if swap_refused is not None:
        tally.v_swap += 1
    else:
        _, refused, _ = await judge_answer(judged, qtype, swapped, passages)
        tally.v_swap += refused is not None
