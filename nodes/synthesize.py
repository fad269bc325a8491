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
from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model

from infra.bioasq import format_exact, normalize_answer
from infra.snippets import prefetch_sentences
from nodes.context import Context
from nodes.evidence import (
    TYPE_INSTRUCTIONS,
    as_answers,
    checked_citations,
    exact_field,
    passages,
    pmid_type,
)
from nodes.organize.aggregate import stated
from nodes.state import Answer, Attempt, Decision, Passage, QAState
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


def evidence_round(state: QAState) -> int:
    """Return the evidence round: 0 before any fallback search, +1 after each."""
    return len(state.get("fallbacks", []))


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


def decided(qtype: str, decision: Decision | None) -> list[str]:
    """Return the decision as exact answers before formatting: what mode "vote" answers."""
    answers = (decision or {}).get("answers") or []
    if not answers:
        return []
    if qtype == "factoid":  # BioASQ takes up to five candidates, best first
        return [str(a["answer"]) for a in answers[:5]]
    top = answers[0]["answer"]
    return [str(i) for i in top] if isinstance(top, list) else [str(top)]


def decision_share(decision: Decision | None) -> float:
    """Return the first answer's share of the support: the decision's own confidence."""
    if not decision or not decision.get("answers"):
        return 0.0
    if "share" in decision:
        return float(decision["share"])
    total = sum(max(0.0, a["support"]) for a in decision["answers"])
    return decision["answers"][0]["support"] / total if total > 0 else 0.0


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
    """Answer from the decision; a repeat attempt in the same round runs at temperature 0."""
    ctx = runtime.context
    qtype = state["qtype"]
    decision = state.get("decision")
    contexts = evidence_for(state, decision, ctx.settings.ensemble.contexts)
    this_round = evidence_round(state)
    if ctx.settings.synthesis.mode == "vote":
        return _final_decision(qtype, decision, contexts, this_round)
    earlier = [a for a in state.get("attempts", []) if a["round"] == this_round]
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
    # documents it cites come from these contexts): CPU work overlapped with the wait.
    reply, _ = await asyncio.gather(
        model.structured(
            synthesis_schema(qtype, [c["pmid"] for c in contexts]),
            messages,
            temperature=temperature,
        ),
        asyncio.to_thread(prefetch_sentences, contexts, ctx.embedder),
    )
    notes: list[str] = []
    if reply.value is not None:
        value = reply.value
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
            "confidence": round(float(value.confidence), 3),
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
    else:
        # The decision stands in; zero confidence sends the question to another attempt or
        # a fallback search.
        answer = {
            "exact": format_exact(qtype, decided(qtype, decision)),
            "ideal": "",
            "confidence": 0.0,
            "cited": [],
            "source": "vote",
        }
    attempt: Attempt = {
        "round": this_round,
        "temperature": temperature,
        "answer": answer,
        "error": reply.error,
    }
    return {
        "answer": answer,
        "attempts": [attempt],
        "calls": [reply.record("synthesize")],
        "notes": notes,
    }


def _final_decision(
    qtype: str, decision: Decision | None, contexts: list[Passage], this_round: int
) -> dict[str, Any]:
    """Return the decision as the answer (synthesis.mode "vote"): no model call."""
    extracted = decided(qtype, decision)
    answers = (decision or {}).get("answers") or []
    plural = bool((decision or {}).get("plural"))
    shown = {c["pmid"] for c in contexts}
    # A plural decision (CORG's groups conflict) answers with every side and its references.
    backing = [p for a in (answers if plural else answers[:1]) for p in a["cited"]]
    cited = list(dict.fromkeys(p for p in backing if p in shown))
    answer: Answer = {
        "extracted": extracted,
        "exact": [] if qtype == "summary" else format_exact(qtype, extracted),
        "ideal": extracted[0] if qtype == "summary" and extracted else "",
        "confidence": round(decision_share(decision), 3),
        "cited": cited,
        "rationale": (decision or {}).get("why", "no decision"),
        "source": "decision",
    }
    if plural and qtype != "summary":
        # CORG's aggregator hands the reader every answer with its references (§4).
        answer["ideal"] = f"The abstracts conflict: {stated(answers)}."
    attempt: Attempt = {"round": this_round, "temperature": 0.0, "answer": answer, "error": None}
    return {"answer": answer, "attempts": [attempt]}
