"""CORG's groups answered by the ensemble strategy: its views of each group's passages, its vote.

The design card's "CORG grouping → ensemble over permutations", composed here; neither paper
does it. CORG (corg.txt §4) answers each group in one call and aggregates the answers with
their citations; the ensemble papers vote over one question's whole top-m. Here each group's
answer is the strategy's decision over that group's passages (every ensemble model × the
strategy's views of them, its vote), and CORG's aggregator (nodes/organize/aggregate.py)
combines the group decisions into the question's: plural when the groups disagree.

Why this way round: CORG's groups are conflict-free, so a vote inside a group weighs readings
of one side of a conflict, never the two sides against each other (a vote over the whole
top-m lets the larger side outvote the other, which CORG's split exists to prevent); and the
strategy's views still spread position bias inside each group. A group is shown only its own
passages: the contexts rerank passed beyond organize's top_k were never related, and mixing
them in would undo the split (so CoBag's pool is the group: its bags differ in order only).

A group smaller than the strategy's m shows all of its passages. K views of n passages repeat
an order when n! < K (permuted_views then cycles): a repeated greedy view (the same model, the
same order, temperature 0) would only repeat its answer, so it is asked once. A one-passage
group is one call per model, a two-passage group two; sampled views (self_consistency) are all
asked, their spread being the temperature's. Calls are so bounded by the strategy's K (CCV's
K, MoI's orders) per group and model, and by min(K, n!) for a group of n.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from nodes.context import Context
from nodes.ensemble.members import Ask, ask_members
from nodes.ensemble.strategies import Plan, Strategy, View
from nodes.organize.aggregate import aggregate, supported_by
from nodes.seeds import question_seed
from nodes.state import Decision, Group, GroupVote, Member, Passage, QAState

VARYING = ("shown", "pool_available")
"""Plan settings that differ from group to group: kept in each group's own decision."""


def for_ensemble(groups: list[Group]) -> bool:
    """Tell whether organize left these groups for the ensemble to answer."""
    return bool(groups) and all(g.get("answered_by") == "ensemble" for g in groups)


@dataclass
class GroupPlan:
    """One group and the strategy's plan for it (its views of the group's passages)."""

    number: int
    """From 1, as organize's trace numbers the groups."""
    group: Group
    """The group as organize wrote it: its PMIDs and the question form its members are asked."""
    plan: Plan


def distinct_views(views: list[View]) -> list[View]:
    """Return the views without a greedy repeat of an earlier one (same model, same order)."""
    seen: set[tuple[int, tuple[int, ...]]] = set()
    kept = []
    for view in views:
        key = (id(view.model), tuple(view.order))
        if view.temperature == 0.0 and key in seen:
            continue
        seen.add(key)
        kept.append(view)
    return kept


async def decide_groups(
    ctx: Context, strategy: Strategy, state: QAState, groups: list[Group]
) -> dict[str, Any]:
    """Answer every group with the strategy, aggregate the group decisions; return the update."""
    qtype, question = state["qtype"], state["question"]
    known: dict[str, Passage] = {
        c["pmid"]: c for c in [*(state.get("contexts") or []), *(state.get("organized") or [])]
    }
    models = ctx.models.role("ensemble")
    # Group k's views come from the question's seed + k - 1: a run is reproduced from the seed
    # and the question the trace holds, and one group of every context is seen as the
    # ungrouped question would be.
    seed = question_seed(ctx.settings.ensemble.seed, question)

    async def planned(number: int, group: Group) -> GroupPlan:
        docs = [known[p] for p in group["pmids"] if p in known]
        plan = await strategy.plan(ctx, group["question"], docs, models, seed + number - 1)
        plan.views = distinct_views(plan.views)
        plan.settings = replace(
            plan.settings, shown=tuple(plan.contexts[i]["pmid"] for i in sorted(plan.shown()))
        )
        return GroupPlan(number, group, plan)

    plans = list(await asyncio.gather(*(planned(n, g) for n, g in enumerate(groups, 1))))
    asks = [
        Ask(view, gp.group["question"], gp.plan.contexts, gp.number)
        for gp in plans
        for view in gp.plan.views
    ]
    asked = await ask_members(asks, qtype, cited=strategy.cites(qtype))
    members = [a.member for a in asked]
    answered: list[Group] = []
    voted: list[GroupVote] = []
    for gp in plans:
        mine = members_of(members, gp.number)
        votes = await strategy.tally(ctx, qtype, mine, gp.plan)
        decision = strategy.decide(qtype, mine, gp.plan, votes)
        failed = sum(m["error"] is not None for m in mine)
        votes = votes | {"strategy": strategy.name, "failed": failed, **gp.plan.diagnostics}
        voted.append(
            {
                "group": gp.number,
                "pmids": gp.group["pmids"],
                "question": gp.group["question"],
                "votes": votes,
                "decision": decision,
            }
        )
        answered.append(decided_group(gp.group, decision, qtype))
    settings = {k: v for k, v in plans[0].plan.settings.record().items() if k not in VARYING} | {
        "shown": list(dict.fromkeys(p for v in voted for p in v["decision"]["settings"]["shown"])),
        "groups": len(plans),
        "corg_answers": "ensemble",
    }
    decision = aggregate(
        answered,
        qtype,
        strategy=strategy.name,
        settings=settings,
        source="ensemble",
        orders=[v["decision"]["order"] for v in voted],
    )
    failed = sum(m["error"] is not None for m in members)
    counts = ", ".join(str(len(members_of(members, gp.number))) for gp in plans)
    notes = [
        f"ensemble: {strategy.name} answered each of organize's {len(plans)} group(s) over its "
        f"own passages, {len(members)} member call(s) ({counts} by group; a greedy view "
        "repeating an order is asked once); CORG's aggregator combines their decisions",
        *dict.fromkeys(n for gp in plans for n in gp.plan.notes),
        *(note for a in asked for note in a.notes),
    ]
    if failed:
        notes.append(f"ensemble: {failed} of {len(members)} member(s) failed and were dropped")
    return {
        "members": members,
        "votes": {
            "strategy": strategy.name,
            "members": sum(m["error"] is None and bool(m["answer"]) for m in members),
            "failed": failed,
            "groups": voted,
        },
        "decision": decision,
        "groups": answered,
        "calls": [c for gp in plans for c in gp.plan.calls] + [a.call for a in asked],
        "notes": notes,
    }


def decided_group(group: Group, decision: Decision, qtype: str) -> Group:
    """Return the group answered by the strategy's decision, as the aggregator reads a group.

    yesno: its winner; factoid: its candidates, best first (five at most, as BioASQ takes);
    list: the items voted in; summary: the words of its first answer. What carries it: the
    passages the winning members cited, weighed as CORG weighs a group's citations.
    """
    answers = decision["answers"]
    if not answers:
        return group | {"answer": "", "exact": [], "cited": [], "error": decision["why"]}
    first = answers[0]["answer"]
    if isinstance(first, list):
        exact, words = list(first), "; ".join(first)
    elif qtype == "summary":
        exact, words = [], first
    elif qtype == "factoid":
        exact = [str(a["answer"]) for a in answers[:5]]
        words = exact[0]
    else:
        exact, words = [first], first
    cited = [p for p in answers[0]["cited"] if p in group["pmids"]]
    return group | {
        "answer": words,
        "exact": exact,
        "cited": cited,
        "error": None,
        "supported_by": supported_by(group, cited),
        "share": float(decision.get("share", 0.0)),
    }


def members_of(members: list[Member], number: int) -> list[Member]:
    """Return the member calls that answered group `number` (from 1)."""
    return [m for m in members if m.get("group") == number]
