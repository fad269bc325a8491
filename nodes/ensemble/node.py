"""The ensemble node: every ensemble model answers every view of the contexts, concurrently.

The strategy named by `ensemble.strategy` (one module each in `strategies/`: single,
self_consistency, permute_vote, cobag, ccv, moi) chooses the views and decides from the
answers; this node asks the members (members.py), records their calls and notes, and writes
the vote (for the trace) and the strategy's decision (what synthesis reads).

Where organize left CORG's groups to it (organize.corg_answers "ensemble", the default), the
strategy answers each group over the group's own passages and CORG's aggregator combines the
group decisions (groups.py: why, and what a small group costs). Where organize answered its
groups itself (the CORG paper's aggregator, its baselines), their aggregate is the decision
and no member is asked. Otherwise (dedupe) the strategy answers the question's top-m.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from nodes.context import Context
from nodes.ensemble.groups import decide_groups, for_ensemble
from nodes.ensemble.members import Ask, ask_members, cited_schema, member_schema
from nodes.ensemble.strategies import StrategyUnavailable, strategy_named
from nodes.ensemble.vote import vote
from nodes.organize.aggregate import aggregate, answered
from nodes.seeds import question_seed
from nodes.state import Passage, QAState

__all__ = ["StrategyUnavailable", "candidates", "cited_schema", "ensemble", "member_schema"]


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
    quorum = ctx.settings.ensemble.list_quorum
    if for_ensemble(state.get("groups") or []):
        return await decide_groups(ctx, strategy, state, state["groups"])
    groups = [g for g in state.get("groups") or [] if answered(g)]
    if groups:
        # organize answered each conflict-free group itself (organize.corg_answers "organize",
        # or a CORG baseline); its aggregator decides, and the members must not re-mix all
        # passages and outvote it. organize wrote the aggregate this round, with its strategy's
        # name and settings; it is rebuilt only for a state written without it.
        decision = state.get("decision")
        if not decision or decision.get("source") != "organize":
            decision = aggregate(groups, qtype)
        return {
            "members": [],
            "votes": vote(qtype, [], list_quorum=quorum) | {"strategy": strategy.name},
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
            "votes": vote(qtype, [], list_quorum=quorum) | {"strategy": strategy.name},
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
    plan.settings = replace(
        plan.settings, shown=tuple(plan.contexts[i]["pmid"] for i in sorted(plan.shown()))
    )
    asks = [Ask(view, question, plan.contexts) for view in plan.views]
    asked = await ask_members(asks, qtype, cited=strategy.cites(qtype))
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
