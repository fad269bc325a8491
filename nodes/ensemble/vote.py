"""Voting over member answers, by BioASQ question type."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from infra.bioasq import normalize_answer


def vote(qtype: str, answers: list[list[str]], *, list_quorum: float = 0.5) -> dict[str, Any]:
    """Vote over members' answer lists; return the ranked candidates and the vote table.

    yesno: majority; factoid: candidates ranked by votes, then by best rank; list: items
    named by at least `list_quorum` of the members; summary: no vote, all answers kept.
    """
    members = [a for a in answers if a]
    if not members:
        return {"ranked": [], "table": [], "agreement": 0.0, "distinct": 0, "members": 0}
    votes: Counter[str] = Counter()
    best_rank: dict[str, int] = defaultdict(lambda: 10**6)
    surface: dict[str, Counter[str]] = defaultdict(Counter)
    for answer in members:
        seen = set()
        for rank, text in enumerate(answer):
            key = normalize_answer(text)
            if not key or key in seen:
                continue
            seen.add(key)
            votes[key] += 1
            best_rank[key] = min(best_rank[key], rank)
            surface[key][text.strip()] += 1
    order = sorted(votes, key=lambda key: (-votes[key], best_rank[key], key))
    table = [
        {"answer": surface[k].most_common(1)[0][0], "votes": votes[k], "normalized": k}
        for k in order
    ]
    if qtype == "list":
        kept = [row for row in table if row["votes"] >= list_quorum * len(members)] or table[:1]
    elif qtype == "factoid":
        kept = table[:5]
    elif qtype == "yesno":
        kept = table[:1]
    else:
        kept = table
    top_votes = table[0]["votes"] if table else 0
    return {
        "ranked": [row["answer"] for row in kept],
        "table": table,
        "agreement": round(top_votes / len(members), 3),
        "distinct": len(table),
        "members": len(members),
    }
