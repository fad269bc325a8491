"""synthesize: merge the ensemble's candidates into one answer with a confidence."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model

from infra.bioasq import format_exact
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
from nodes.state import Answer, Attempt, QAState
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


async def synthesize(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Synthesize an answer; a repeat attempt in the same round runs at temperature 0."""
    ctx = runtime.context
    qtype = state["qtype"]
    # The synthesizer reads what the ensemble members read: the top ensemble.contexts passages.
    contexts = (state.get("organized") or state.get("contexts") or [])[
        : ctx.settings.ensemble.contexts
    ]
    votes = state.get("votes") or {}
    this_round = evidence_round(state)
    earlier = [a for a in state.get("attempts", []) if a["round"] == this_round]
    temperature = ctx.settings.synthesis.temperature if not earlier else 0.0
    model = ctx.models.first("synthesis")
    groups = [
        [g["answer"], g["cited"] or g["pmids"]] for g in state.get("groups") or [] if g["answer"]
    ]
    candidates = json.dumps(
        [[row["answer"], row["votes"]] for row in votes.get("table", [])][:10], ensure_ascii=False
    )
    if groups:
        # Every group's answer reaches synthesis with its sources, so no distinct answer is lost.
        candidates += "\nAnswers per group of abstracts (answer, PMIDs): " + json.dumps(
            groups, ensure_ascii=False
        )
    messages = render(
        "synthesize",
        instructions=TYPE_INSTRUCTIONS[qtype],
        contexts=passages(contexts, model.context_chars)
        if contexts
        else "(no abstracts were found)",
        question=state["question"],
        candidates=candidates,
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
    dropped: list[str] = []
    if reply.value is not None:
        value = reply.value
        cited, dropped = checked_citations(
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
    else:
        # The vote stands in; zero confidence sends the question to another attempt or fallback.
        answer = {
            "exact": votes.get("ranked", []),
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
        "notes": dropped,
    }
