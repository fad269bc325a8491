"""Voting over member answers, by BioASQ question type."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from infra.bioasq import normalize_answer
from nodes.state import VoteRow, Votes


def _compact(key: str) -> str:
    return re.sub(r"[\s\-_/.]+", "", key)


def _initials(key: str) -> str:
    words = [w for w in re.split(r"[\s\-_/]+", key) if w and w not in ("of", "and", "in")]
    return "".join(w[0] for w in words) if len(words) > 1 else ""


def synonym_clusters(
    keys: Sequence[str], vectors: np.ndarray | None, *, threshold: float
) -> dict[str, str]:
    """Map each normalized candidate to its cluster's first key (keys in vote order).

    Two candidates are one answer when they differ only by spaces and hyphens ("IL-6",
    "il 6", "IL6"), when one is the other's initials ("TNF", "tumor necrosis factor"), or when
    their unit vectors' cosine reaches `threshold` (ensemble.synonym_cosine, stated there).
    """
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    compact = [_compact(k) for k in keys]
    initials = [_initials(k) for k in keys]
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            same = (
                compact[i] == compact[j]
                or (len(compact[i]) >= 2 and compact[i] == initials[j])
                or (len(compact[j]) >= 2 and compact[j] == initials[i])
                or (vectors is not None and float(vectors[i] @ vectors[j]) >= threshold)
            )
            if same:
                a, b = root(i), root(j)
                parent[max(a, b)] = min(a, b)
    return {key: keys[root(i)] for i, key in enumerate(keys)}


def candidate_keys(answers: Sequence[Sequence[str]]) -> list[str]:
    """Return the distinct normalized candidates of all members, in first-seen order."""
    return list(dict.fromkeys(k for a in answers for t in a if (k := normalize_answer(t))))


def vote(
    qtype: str,
    answers: Sequence[Sequence[str]],
    *,
    list_quorum: float,
    weights: Sequence[float] | None = None,
    clusters: dict[str, str] | None = None,
) -> Votes:
    """Vote over members' answer lists; return the ranked candidates and the vote table.

    yesno: majority; factoid: candidates ranked by votes, then by best rank (≤ 5); list:
    items named by at least `list_quorum` of the members; summary: no vote, all answers kept.

    Args:
        qtype: BioASQ question type.
        answers: Each member's answers, best first ([] for a member that failed).
        list_quorum: Share of members a list item needs (ensemble.list_quorum, stated there).
        weights: Per member; equal votes go to the answer whose best supporter weighs most
            (CoBag: the member whose view is most relevant). Default: best rank, then name.
        clusters: Normalized candidate → cluster key (`synonym_clusters`); synonyms vote
            together. Default: exact normalized matches only.
    """
    pairs = [(a, (weights[i] if weights else 0.0)) for i, a in enumerate(answers) if a]
    if not pairs:
        return {"ranked": [], "table": [], "agreement": 0.0, "distinct": 0, "members": 0}
    clusters = clusters or {}
    votes: Counter[str] = Counter()
    best_rank: dict[str, int] = defaultdict(lambda: 10**6)
    best_weight: dict[str, float] = defaultdict(lambda: -np.inf)
    surface: dict[str, Counter[str]] = defaultdict(Counter)
    for answer, weight in pairs:
        seen = set()
        for rank, text in enumerate(answer):
            normalized = normalize_answer(text)
            key = clusters.get(normalized, normalized)
            if not key:
                continue
            if key in seen:
                continue
            seen.add(key)
            surface[key][text.strip()] += 1
            votes[key] += 1
            best_rank[key] = min(best_rank[key], rank)
            best_weight[key] = max(best_weight[key], weight)
    order = sorted(
        votes,
        key=lambda k: (-votes[k], -best_weight[k] if weights else 0.0, best_rank[k], k),
    )
    table: list[VoteRow] = [
        {
            "answer": surface[k].most_common(1)[0][0],
            "votes": votes[k],
            "normalized": k,
            **({"variants": sorted(surface[k])} if len(surface[k]) > 1 else {}),
        }
        for k in order
    ]
    members = len(pairs)
    if qtype == "list":
        kept = [row for row in table if row["votes"] >= list_quorum * members] or table[:1]
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
        "agreement": round(top_votes / members, 3),
        "distinct": len(table),
        "members": members,
    }
