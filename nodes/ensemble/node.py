"""The ensemble node: fan out member calls over (model, view), then vote."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model

from infra.models import ChatModel
from nodes.context import Context
from nodes.ensemble.views import permuted_views, view_seed
from nodes.ensemble.vote import vote
from nodes.evidence import TYPE_INSTRUCTIONS, as_answers, exact_field, passages, pmid_type
from nodes.state import QAState
from prompts import render


def member_schema(qtype: str, pmids: list[str]) -> type[BaseModel]:
    """Return the structured answer a member gives for this question type and these passages."""
    answer_type, answer_field = exact_field(qtype)
    return create_model(
        "MemberAnswer",
        answer=(answer_type, answer_field),
        pmids=(
            list[pmid_type(pmids)],
            Field(description="PMIDs supporting the answer", max_length=3),
        ),
    )


async def ensemble(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer from K permuted views with every ensemble model, concurrently, and vote."""
    ctx = runtime.context
    settings = ctx.settings.ensemble
    qtype = state["qtype"]
    contexts = state.get("organized") or state.get("contexts") or []
    if not contexts:
        return {"members": [], "votes": vote(qtype, [])}
    views = permuted_views(
        len(contexts),
        settings.members,
        settings.contexts,
        view_seed(settings.seed, state["question"]),
    )
    schema = member_schema(qtype, [c["pmid"] for c in contexts])
    limit = asyncio.Semaphore(settings.max_concurrency)
    jobs = [
        _member(limit, model, schema, state["question"], qtype, [contexts[i] for i in view], number)
        for model in ctx.models.role("ensemble")
        for number, view in enumerate(views)
    ]
    members = await asyncio.gather(*jobs)
    answered = [m["answer"] for m in members if m["error"] is None]
    votes = vote(qtype, answered)
    notes = []
    if failed := sum(m["error"] is not None for m in members):
        notes.append(f"ensemble: {failed} of {len(members)} member(s) failed and were dropped")
    calls = [m.pop("call") for m in members]
    return {"members": members, "votes": votes, "calls": calls, "notes": notes}


async def _member(
    limit: asyncio.Semaphore,
    model: ChatModel,
    schema: type[BaseModel],
    question: str,
    qtype: str,
    docs: list[dict[str, Any]],
    number: int,
) -> dict[str, Any]:
    messages = render(
        "ensemble",
        instructions=TYPE_INSTRUCTIONS[qtype],
        contexts=passages(docs, model.context_chars),
        question=question,
    )
    async with limit:
        reply = await model.structured(schema, messages, temperature=0.0)
    value = reply.value
    return {
        "model": model.name,
        "view": number,
        "order": [d["pmid"] for d in docs],
        "answer": as_answers(qtype, value.answer) if value else [],
        "pmids": list(value.pmids) if value else [],
        "error": reply.error,
        "latency_s": round(reply.latency_s, 3),
        "tokens": reply.input_tokens + reply.output_tokens,
        "call": reply.record("ensemble"),
    }
