"""Decisions: a strategy's ranked answers with their support, and the evidence order it chose.

Synthesis reads the decision, never the vote table; every strategy's settings ride along in it,
so a trace alone says how a run was decided and how to run it again.
"""

from __future__ import annotations

from typing import Protocol

from infra.bioasq import normalize_answer
from nodes.ensemble.strategy_settings import StrategySettings
from nodes.state import DecidedAnswer, Decision, Member, Passage, Votes


class Plan(Protocol):
    """What a decision reads of a strategy's plan (strategies/registry.py's Plan)."""

    contexts: list[Passage]
    settings: StrategySettings
    clusters: dict[str, str]

    def shown_order(self) -> list[int]:
        """Return the evidence order as indices into contexts."""
        ...


def supporters(members: list[Member], key: str, clusters: dict[str, str]) -> list[Member]:
    """Return the answering members that named the candidate counted under `key`."""
    found = []
    for member in members:
        if member["error"] is not None:
            continue
        keys = {clusters.get(k, k) for a in member["answer"] if (k := normalize_answer(a))}
        if key in keys:
            found.append(member)
    return found


def cited_by(members: list[Member]) -> list[str]:
    """Return the PMIDs these members cite, first cited first."""
    return list(dict.fromkeys(p for m in members for p in m.get("pmids") or []))


def order_pmids(plan: Plan) -> list[str]:
    """Return the plan's evidence order as PMIDs."""
    return [plan.contexts[i]["pmid"] for i in plan.shown_order()]


def majority_decision(
    name: str,
    qtype: str,
    members: list[Member],
    plan: Plan,
    votes: Votes,
    *,
    how: str,
    tie: str = "the best rank a member gave it, then the name",
) -> Decision:
    """Return the vote's decision: candidates by votes (a list question: the items voted in).

    Args:
        name: The strategy's name.
        qtype: BioASQ question type.
        members: Every member call, failed ones included.
        plan: The strategy's plan (its settings, evidence order, synonym clusters).
        votes: `vote`'s result over these members.
        how: How the votes were counted, for the one-line why.
        tie: How equal votes are broken, for the why when the top two tie.
    """
    answering = votes.get("members", 0)
    table = votes.get("table") or []
    decision: Decision = {
        "strategy": name,
        "answers": [],
        "order": order_pmids(plan),
        "why": f"no member answered ({how})",
        "settings": plan.settings.record(),
        "source": "ensemble",
        "share": 0.0,
    }
    if not table or not answering:
        return decision
    cited = {
        row["normalized"]: cited_by(supporters(members, row["normalized"], plan.clusters))
        for row in table
    }
    if qtype == "list":
        kept = [row for row in table if row["answer"] in votes["ranked"]]
        support = sum(row["votes"] for row in kept) / (len(kept) * answering)
        answers: list[DecidedAnswer] = [
            {
                "answer": [row["answer"] for row in kept],
                "support": round(support, 4),
                "cited": list(dict.fromkeys(p for row in kept for p in cited[row["normalized"]])),
            }
        ]
        quorum = plan.settings.list_quorum
        why = (
            f"{len(kept)} item(s) named by at least {quorum:.0%} of {answering} members ({how}); "
            f"support: the items' mean share of members"
        )
        return decision | {"answers": answers, "why": why, "share": round(support, 4)}
    answers = [
        {"answer": row["answer"], "support": float(row["votes"]), "cited": cited[row["normalized"]]}
        for row in table
    ]
    top = table[0]
    why = f"{top['votes']} of {answering} members answered {top['answer']!r} ({how})"
    if len(table) > 1 and table[1]["votes"] == top["votes"]:
        why += f"; a tie with {table[1]['answer']!r}, broken by {tie}"
    return decision | {"answers": answers, "why": why, "share": round(top["votes"] / answering, 4)}
