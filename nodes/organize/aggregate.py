"""CORG's aggregator: every group's answers with their citations, ranked into one decision.

SEE: Lee et al., "Generating Answers from Complex, Interrelated Contexts" (§4, Aggregator).
Each group is answered on its own and the answers are aggregated with citations to their
source contexts, so every answer reaches the reader with its evidence; the paper filters none
for correctness. It lists them and does not rank: quorum must put one first (a yes/no or
factoid answer), so answers are ranked by the contexts behind them: a group stands for its
own contexts and those dropped in their favour (duplicates and ambiguous twins say the same),
ties going to the group of the better-ranked context (the paper's group order). Every answer
stays in the decision, and list and summary answers keep them all in one.
"""

from __future__ import annotations

from typing import Any

from infra.bioasq.answers import normalize_answer
from nodes.method_records import DecidedAnswer, Decision, Group


def answered(group: Group) -> bool:
    """Return whether a group's call gave an answer."""
    return bool(group.get("answer") or group.get("exact"))


def aggregate(
    groups: list[Group],
    qtype: str,
    *,
    strategy: str = "corg",
    settings: dict[str, Any] | None = None,
) -> Decision:
    """Return the decision organize's group answers make: all answers, best supported first.

    Args:
        groups: The answered groups, in the order organize formed them.
        qtype: The question type: yesno and factoid rank answers; list and summary keep all.
        strategy: The organize strategy that formed the groups.
        settings: Every setting of that strategy, recorded in the decision.
    """
    weights = [len(g.get("covers") or g["pmids"]) for g in groups]
    total = sum(weights) or 1
    if qtype in ("list", "summary") or not any(g.get("exact") for g in groups):
        answers, ranked = _all_in_one(groups, weights, total, qtype)
    else:
        answers, ranked = _ranked(groups, weights, total)
    order = list(dict.fromkeys(p for k in ranked for p in groups[k]["pmids"]))
    return {
        "strategy": strategy,
        "answers": answers,
        "order": order,
        "why": _why(strategy, groups, weights, answers, total),
        "settings": dict(settings or {}),
        "source": "organize",
        # The share of the contexts behind the first answer: its confidence in mode "vote".
        "share": answers[0]["support"] if answers else 0.0,
    }


def _sources(group: Group) -> list[str]:
    return list(group.get("cited") or group["pmids"])


def _ranked(groups: list[Group], weights: list[int], total: int) -> tuple[list, list[int]]:
    """Rank the groups' distinct short answers by the contexts behind them."""
    found: dict[str, dict[str, Any]] = {}
    for k, group in enumerate(groups):
        if not answered(group):
            continue
        for position, item in enumerate(group.get("exact") or [group["answer"]]):
            key = normalize_answer(item) or item
            row = found.setdefault(
                key, {"answer": item, "weight": 0, "cited": [], "first": (k, position)}
            )
            if k not in row.setdefault("groups", []):
                row["groups"].append(k)
                row["weight"] += weights[k]
                row["cited"] = list(dict.fromkeys([*row["cited"], *_sources(group)]))
    rows = sorted(found.values(), key=lambda r: (-r["weight"], r["first"]))
    answers: list[DecidedAnswer] = [
        {"answer": r["answer"], "support": round(r["weight"] / total, 4), "cited": r["cited"]}
        for r in rows
    ]
    ranked = list(dict.fromkeys(k for r in rows for k in r["groups"]))
    ranked += [k for k in range(len(groups)) if k not in ranked]
    return answers, ranked


def _all_in_one(
    groups: list[Group], weights: list[int], total: int, qtype: str
) -> tuple[list, list[int]]:
    """Keep every group's answers in one: a list's items, or a summary's parts, group by group."""
    done = [k for k, g in enumerate(groups) if answered(g)]
    if not done:
        return [], list(range(len(groups)))
    cited = list(dict.fromkeys(p for k in done for p in _sources(groups[k])))
    support = round(sum(weights[k] for k in done) / total, 4)
    if qtype == "list":
        items: dict[str, str] = {}
        for k in done:
            for item in groups[k].get("exact") or [groups[k]["answer"]]:
                items.setdefault(normalize_answer(item) or item, item)
        answer: str | list[str] = list(items.values())
    else:
        answer = "; ".join(groups[k]["answer"] for k in done if groups[k]["answer"])
    return [{"answer": answer, "support": support, "cited": cited}], list(range(len(groups)))


def _why(strategy: str, groups: list[Group], weights: list[int], answers: list, total: int) -> str:
    done = sum(answered(g) for g in groups)
    head = f"{strategy}: {done} of {len(groups)} group(s) answered apart, aggregated with citations"
    if not answers:
        return f"{head}; none gave an answer"
    parts = []
    for row in answers[:3]:
        text = row["answer"] if isinstance(row["answer"], str) else "; ".join(row["answer"])
        share = round(row["support"] * total)
        parts.append(f"{text[:60]!r} stands for {share} of {total} context(s)")
    return f"{head}; " + ", ".join(parts)
