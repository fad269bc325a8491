"""The ensemble node: every ensemble model answers every view of the contexts, concurrently.

The strategy named by `ensemble.strategy` (one module each in `strategies/`: single,
self_consistency, permute_vote, cobag, ccv, moi) chooses the views and decides from the
answers; this node asks the members, records their calls and notes, and writes the vote (for
the trace) and the strategy's decision (what synthesis reads). When organize answered groups
(CORG), their aggregate is the decision and no member is asked.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, NamedTuple

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model

from nodes.answer_fields import (
    MEMBER_INSTRUCTIONS,
    as_answers,
    checked_citations,
    member_field,
    pmid_type,
)
from nodes.context import Context
from nodes.ensemble.strategies import StrategyUnavailable, View, strategy_named
from nodes.ensemble.vote import vote
from nodes.organize.aggregate import aggregate, answered
from nodes.passages import passages
from nodes.progress import report
from nodes.seeds import question_seed
from nodes.state import Call, Member, Passage, QAState
from prompts import render

__all__ = ["StrategyUnavailable", "candidates", "cited_schema", "ensemble", "member_schema"]


def member_schema(qtype: str, pmids: list[str]) -> type[BaseModel]:
    """Return the structured answer a member gives for this question type and these passages."""
    answer_type, answer_field = member_field(qtype)
    return create_model(
        "MemberAnswer",
        answer=(answer_type, answer_field),
        pmids=(
            list[pmid_type(pmids)],
            Field(description="PMIDs supporting the answer", max_length=3),
        ),
    )


def cited_schema(qtype: str, shown: int) -> type[BaseModel]:
    """Return a CCV member's answer: one answer, the number of one passage, and a quote."""
    answer_type, answer_field = member_field(qtype)
    return create_model(
        "CitedAnswer",
        answer=(answer_type, answer_field),
        passage=(
            Literal[tuple(range(1, shown + 1))],
            Field(description="Number of the one passage that best supports the answer"),
        ),
        quote=(str, Field(description="A short quote from that passage", max_length=200)),
    )


def candidates(state: QAState, organized_top_k: int) -> list[Passage]:
    """Return every passage a strategy may read, best first: organize's, then the rest.

    Organize reads the top `organize.top_k` contexts (and may drop duplicates among them);
    the contexts rerank passed beyond those follow, so a strategy drawing from more than that
    (CoBag's pool) still gets them.
    """
    contexts = list(state.get("contexts") or [])
    organized = list(state.get("organized") or [])
    if not organized:
        return contexts
    seen = {c["pmid"] for c in organized} | {c["pmid"] for c in contexts[:organized_top_k]}
    return organized + [c for c in contexts[organized_top_k:] if c["pmid"] not in seen]


async def ensemble(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer from the strategy's views with every ensemble model, concurrently, and decide."""
    ctx = runtime.context
    strategy = strategy_named(ctx.settings.ensemble.strategy)
    qtype = state["qtype"]
    question = state["question"]
    groups = [g for g in state.get("groups") or [] if answered(g)]
    if groups:
        # CORG answered each conflict-free group; its aggregator decides, and the members must
        # not re-mix all passages and outvote it. organize wrote the aggregate this round, with
        # its strategy's name and settings; it is rebuilt only for a state written without it.
        decision = state.get("decision")
        if not decision or decision.get("source") != "organize":
            decision = aggregate(groups, qtype)
        return {
            "members": [],
            "votes": vote(qtype, []) | {"strategy": strategy.name},
            "decision": decision,
            "notes": [
                f"ensemble: organize's {len(groups)} group answer(s) decide "
                f"({decision['strategy']}); no member calls"
            ],
        }
    contexts = candidates(state, ctx.settings.organize.top_k)
    if not contexts:
        return {
            "members": [],
            "votes": vote(qtype, []) | {"strategy": strategy.name},
            "decision": {
                "strategy": strategy.name,
                "answers": [],
                "order": [],
                "why": "no contexts to answer from",
                "settings": {},
                "source": "ensemble",
                "share": 0.0,
            },
        }
    models = ctx.models.role("ensemble")
    seed = question_seed(ctx.settings.ensemble.seed, question)
    plan = await strategy.plan(ctx, question, contexts, models, seed)
    # What reached the members (the union of the views, in rank order); what reaches
    # synthesis is the decision's order. Both in the trace, so a reader sees which of the
    # reranked abstracts a method actually used.
    plan.settings["shown"] = [plan.contexts[i]["pmid"] for i in sorted(plan.shown())]
    cited = strategy.cites(qtype)
    asked = await _answer_views(plan.views, question, qtype, plan.contexts, cited=cited)
    members = [a.member for a in asked]
    calls = plan.calls + [a.call for a in asked]
    votes = await strategy.tally(ctx, qtype, members, plan)
    decision = strategy.decide(qtype, members, plan, votes)
    notes = [*plan.notes, *(note for a in asked for note in a.notes)]
    if failed := sum(m["error"] is not None for m in members):
        notes.append(f"ensemble: {failed} of {len(members)} member(s) failed and were dropped")
    return {
        "members": members,
        "votes": votes | {"strategy": strategy.name, "failed": failed, **plan.diagnostics},
        "decision": decision,
        "calls": calls,
        "notes": notes,
    }


class Asked(NamedTuple):
    """One member call: the member as the state keeps it, its model call, its citation notes."""

    member: Member
    call: Call
    notes: list[str]


async def _answer_views(
    views: list[View],
    question: str,
    qtype: str,
    contexts: list[Passage],
    *,
    cited: bool,
) -> list[Asked]:
    # Each model bounds its own calls in flight (per endpoint, from its spec), so views of
    # different endpoints never wait for one another.
    done = 0

    async def counted(view: View) -> Asked:
        nonlocal done
        member = await _member(view, question, qtype, contexts, cited=cited)
        done += 1
        report("ensemble", done=done, total=len(views))
        return member

    report("ensemble", done=0, total=len(views))
    return list(await asyncio.gather(*(counted(view) for view in views)))


async def _member(
    view: View,
    question: str,
    qtype: str,
    contexts: list[Passage],
    *,
    cited: bool,
) -> Asked:
    docs = [contexts[i] for i in view.order]
    model = view.model
    instructions = MEMBER_INSTRUCTIONS[qtype]
    if cited:
        instructions += " Give the number of the one passage that best supports it, and a quote."
        schema = cited_schema(qtype, len(docs))
    else:
        schema = member_schema(qtype, [d["pmid"] for d in docs])
    messages = render(
        "ensemble",
        instructions=instructions,
        contexts=passages(docs, model.context_chars),
        question=question,
    )
    reply = await model.structured(schema, messages, temperature=view.temperature)
    value = reply.value
    member: Member = {
        "model": model.name,
        "view": view.number,
        "order": [d["pmid"] for d in docs],
        "temperature": view.temperature,
        "answer": as_answers(qtype, value.answer) if value else [],
        "pmids": [],
        "raw": reply.raw,
        "error": reply.error,
        "latency_s": round(reply.latency_s, 3),
        "tokens": reply.input_tokens + reply.output_tokens,
    }
    notes: list[str] = []
    if value is not None and cited:
        member |= {"passage": value.passage, "quote": value.quote}
        member["pmids"] = [docs[value.passage - 1]["pmid"]]
    elif value is not None:
        member["pmids"], notes = checked_citations(
            list(value.pmids), [d["pmid"] for d in docs], f"ensemble member {view.number}"
        )
    return Asked(member, reply.record("ensemble"), notes)
