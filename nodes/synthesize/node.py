"""synthesize: turn the strategy's decision into the answer, with a confidence.

It reads the decision (state["decision"]: ranked answers, their support, the evidence order),
never the vote table. synthesis.mode "llm" (default) shows the synthesizer the passages in the
decision's order and tells it what the ensemble decided and why; the trace records when it
answers otherwise. "vote" makes the decision final, formatted by the rule step, with no model
call: the papers' own setting. As the BioASQ ensemble paper's synthesis, the first attempt
runs at synthesis.temperature (0.1) and a low-confidence one again at 0 (graphs/routers.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model

from infra.bioasq import exact_answer_shape, format_exact, normalize_answer
from infra.snippets import prefetch_sentences
from nodes.answer_fields import (
    TYPE_INSTRUCTIONS,
    as_answers,
    checked_citations,
    exact_field,
    pmid_type,
)
from nodes.answered import insufficient, why_unanswered
from nodes.context import Context
from nodes.passages import passages
from nodes.state import (
    Answer,
    Attempt,
    Call,
    Decision,
    Passage,
    PassageRelevance,
    QAState,
    evidence_round,
)
from nodes.synthesize.confidence import earned_confidence
from nodes.synthesize.rule import decided, rule_answer, stated
from nodes.synthesize.support import held_to_evidence, relevance_for, support_share
from prompts import render


def synthesis_schema(qtype: str, pmids: list[str]) -> type[BaseModel]:
    """Return the synthesis output for this question type, citing only these PMIDs."""
    exact_type, exact_info = exact_field(qtype)
    fields: dict[str, Any] = {}
    if qtype != "summary":
        fields["exact_answer"] = (exact_type, exact_info)
    fields |= {
        "ideal_answer": (
            str,
            Field(description="A paragraph answering the question", max_length=600),
        ),
        "confidence": (
            float,
            Field(description="Probability the answer is correct", ge=0.0, le=1.0),
        ),
        "cited_pmids": (
            list[pmid_type(pmids)],
            Field(description="PMIDs supporting the answer", max_length=5),
        ),
        "rationale": (
            str,
            Field(
                "",
                description="Which evidence decided the answer and how conflicts were resolved",
                max_length=300,
            ),
        ),
    }
    return create_model("Synthesis", **fields)


def evidence_for(state: QAState, decision: Decision | None, m: int) -> list[Passage]:
    """Return the passages synthesis reads: the decision's order, else the top m.

    The decision's order is the one its strategy chose (MoI's debiased order, CoBag's most
    relevant first, CCV's winning passage first); the passages come from the state's contexts.
    """
    known: dict[str, Passage] = {}
    for c in [*(state.get("organized") or []), *(state.get("contexts") or [])]:
        known.setdefault(c["pmid"], c)
    if decision and decision.get("order"):
        chosen = [known[p] for p in decision["order"] if p in known]
        if chosen:
            return chosen
    return (state.get("organized") or state.get("contexts") or [])[:m]


def _readable(state: QAState, contexts: list[Passage]) -> list[Passage]:
    """Return every passage the answer or a member may cite: the evidence and all contexts."""
    known: dict[str, Passage] = {}
    for c in [*contexts, *(state.get("organized") or []), *(state.get("contexts") or [])]:
        known.setdefault(c["pmid"], c)
    return list(known.values())


def overrides(qtype: str, decision: Decision | None, extracted: list[str]) -> bool:
    """Tell whether the synthesizer's exact answer departs from the decision's first answer."""
    if qtype == "summary" or not decision or not decision.get("answers"):
        return False
    wanted = decided(qtype, decision)
    if qtype == "list":
        return {normalize_answer(a) for a in wanted} != {normalize_answer(a) for a in extracted}
    return not extracted or normalize_answer(extracted[0]) != normalize_answer(wanted[0])


def decision_lines(decision: Decision | None, groups: list[list[Any]]) -> str:
    """Return what the synthesizer is told the ensemble decided, and why."""
    if not decision or not decision.get("answers"):
        lines = ["The ensemble reached no decision: answer from the abstracts."]
    else:
        first, *rest = decision["answers"]
        # JSON, so the answer stands apart from the reason (a list question's items stay a list).
        lines = [
            f"Ensemble decision: {json.dumps(first['answer'], ensure_ascii=False)}",
            f"Why: {decision['why']}",
        ]
        if rest:
            others = [[a["answer"], round(a["support"], 3)] for a in rest[:9]]
            lines.append(f"Other answers (support): {json.dumps(others, ensure_ascii=False)}")
    if groups:
        # Every group's answer reaches synthesis with its sources, so no distinct answer is lost.
        lines.append(
            "Answers per group of abstracts (answer, PMIDs): "
            + json.dumps(groups, ensure_ascii=False)
        )
    return "\n".join(lines)


async def synthesize(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer from the decision; a repeat attempt in the same round runs at temperature 0.

    An answer that breaks the contract (infra/bioasq/contract.py) is a failed attempt: the
    next attempt runs, and after the round's last one the decision stands in, formatted by the
    rule step, or the answer says the evidence is insufficient.
    """
    ctx = runtime.context
    qtype = state["qtype"]
    decision = state.get("decision")
    contexts = evidence_for(state, decision, ctx.settings.ensemble.contexts)
    this_round = evidence_round(state)
    judging = asyncio.to_thread(
        relevance_for, ctx, state["question"], _readable(state, contexts), state.get("relevance")
    )
    if ctx.settings.synthesis.mode == "vote":
        judged = await judging
        relevance = {**(state.get("relevance") or {}), **judged}
        answer, checking = await _standing_in(
            state, decision, contexts, ctx, relevance, why_failed=None
        )
        attempt: Attempt = {
            "round": this_round,
            "temperature": 0.0,
            "answer": answer,
            "error": None,
        }
        return (
            {"answer": answer, "attempts": [attempt]}
            | ({"calls": checking} if checking else {})
            | ({"relevance": judged} if judged else {})
        )
    earlier = [a for a in state.get("attempts", []) if a["round"] == this_round]
    last = len(earlier) + 1 >= ctx.settings.synthesis.max_attempts
    temperature = ctx.settings.synthesis.temperature if not earlier else 0.0
    model = ctx.models.first("synthesis")
    groups = [
        [g["answer"], g["cited"] or g["pmids"]] for g in state.get("groups") or [] if g["answer"]
    ]
    messages = render(
        "synthesize",
        instructions=TYPE_INSTRUCTIONS[qtype],
        contexts=passages(contexts, model.context_chars)
        if contexts
        else "(no abstracts were found)",
        question=state["question"],
        decision=decision_lines(decision, groups),
    )
    # While the model thinks, embed the sentences finalize will pick snippets from (the
    # documents it cites come from these contexts), and judge the relevance of passages no
    # earlier node judged: CPU work overlapped with the wait.
    reply, _, judged = await asyncio.gather(
        model.structured(
            synthesis_schema(qtype, [c["pmid"] for c in contexts]),
            messages,
            temperature=temperature,
        ),
        asyncio.to_thread(prefetch_sentences, contexts, ctx.embedder),
        judging,
    )
    relevance = {**(state.get("relevance") or {}), **judged}
    notes: list[str] = []
    calls = [reply.record("synthesize")]
    error = reply.error
    answer: Answer | None = None
    if reply.value is not None:
        answer, notes = _from_reply(qtype, reply.value, decision, contexts)
        # The support check holds it to the contract first (its one gate), then to the
        # evidence it cites.
        answer, error, checking = await held_to_evidence(
            ctx, state["question"], qtype, answer, contexts, relevance
        )
        calls += checking
        if error is None:
            answer |= _earned(
                state, answer, contexts, relevance, model=float(reply.value.confidence)
            )
    if error is not None:
        notes.append(f"synthesize: attempt {len(earlier) + 1} failed: {error}")
        if last:
            # The round's last attempt failed too: the decision stands in, by the rule step.
            answer, standing = await _standing_in(
                state, decision, contexts, ctx, relevance, why_failed=error
            )
            calls += standing
            notes.append(f"synthesize: the {answer['source']} answer stands in")
        else:
            answer = {
                **(answer or {"exact": [], "ideal": "", "cited": []}),
                "confidence": 0.0,
                "model_confidence": 0.0,
                "source": "synthesis",
                "failed": error,
            }
    attempt = {"round": this_round, "temperature": temperature, "answer": answer, "error": error}
    return {
        "answer": answer,
        "attempts": [attempt],
        "calls": calls,
        "notes": notes,
    } | ({"relevance": judged} if judged else {})


def _from_reply(
    qtype: str, value: Any, decision: Decision | None, contexts: list[Passage]
) -> tuple[Answer, list[str]]:
    """Return the synthesizer's reply as an answer (confidence not yet earned), and notes."""
    cited, notes = checked_citations(
        list(value.cited_pmids), [c["pmid"] for c in contexts], "synthesize"
    )
    extracted = as_answers(qtype, getattr(value, "exact_answer", None))
    answer: Answer = {
        # Extraction (the model) and BioASQ formatting (a cheap rule step) are separate, so
        # each can be judged, and changed, on its own.
        "extracted": extracted,
        "exact": format_exact(qtype, extracted),
        "ideal": value.ideal_answer.strip(),
        "confidence": 0.0,
        "cited": cited,
        "rationale": value.rationale.strip(),
        "source": "synthesis",
    }
    if decision and decision.get("answers") and qtype != "summary":
        answer["overrode_decision"] = overrides(qtype, decision, extracted)
        if answer["overrode_decision"]:
            notes.append(
                f"synthesize: answered {'; '.join(extracted) or '(nothing)'!r} over the "
                f"{decision['strategy']} decision {'; '.join(decided(qtype, decision))!r}"
            )
    return answer, notes


def _earned(
    state: QAState,
    answer: Answer,
    contexts: list[Passage],
    relevance: Mapping[str, PassageRelevance],
    *,
    model: float | None,
) -> dict[str, Any]:
    """Return the answer's confidence fields, earned from the evidence."""
    earned = earned_confidence(
        state["qtype"],
        model=model,
        given=answer["exact"],
        cited=answer["cited"],
        decision=state.get("decision"),
        members=state.get("members") or [],
        passages=contexts,
        supported=support_share(state["qtype"], answer),
        relevance=relevance,
        support=answer.get("support"),
    )
    return {
        "confidence": earned["confidence"],
        "model_confidence": None if model is None else round(model, 3),
        "confidence_parts": earned["parts"],
    }


async def _standing_in(
    state: QAState,
    decision: Decision | None,
    contexts: list[Passage],
    ctx: Context,
    relevance: Mapping[str, PassageRelevance],
    *,
    why_failed: str | None,
) -> tuple[Answer, list[Call]]:
    """Return the decision formatted by the rule step, its confidence earned from the evidence.

    Held to its evidence as synthesis's answer is (a passage off the question is never
    evidence, nor the sentence its prose quotes); the verifier's call comes back beside it.
    """
    # The rule step states the answer with a sentence of a passage on the question (an
    # off-topic sentence that happens to hold the decided entity would read as support), and
    # cites what the decision cites: a decision resting on passages off the question is
    # refused on them.
    on_question = [c for c in contexts if (relevance.get(c["pmid"]) or {}).get("relevant")]
    answer = await asyncio.to_thread(
        rule_answer,
        state["qtype"],
        state["question"],
        decision,
        contexts,
        ctx.embedder,
        why_failed=why_failed,
        stating=on_question,
    )
    if answer["source"] == "insufficient":
        return answer | {"model_confidence": None}, []
    qtype = state["qtype"]
    answer, refused, calls = await held_to_evidence(
        ctx, state["question"], qtype, answer, contexts, relevance
    )
    if refused is None and answer["support"]["dropped"]:
        # Stated again from what the evidence carries, never from the items it lost: new
        # prose, so it meets the contract (the door) again.
        answer["ideal"], _ = await asyncio.to_thread(
            stated, qtype, state["question"], answer["exact"], decision, on_question, ctx.embedder
        )
        refused = why_unanswered(
            qtype, state["question"], exact_answer_shape(qtype, answer["exact"]), answer["ideal"]
        )
    if refused is not None:
        reason = refused if why_failed is None else f"{refused}; synthesis failed: {why_failed}"
        return insufficient(reason, answer.get("rationale") or "no decision") | {
            "model_confidence": None,
            "support": answer["support"],
        }, calls
    return answer | _earned(state, answer, contexts, relevance, model=None), calls
