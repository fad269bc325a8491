"""CORG's aggregator: every group's answer with the contexts that carry it, none by group size.

SEE: Lee et al., "Generating Answers from Complex, Interrelated Contexts" (§4, Aggregator and
Figure 3): each group is answered on its own and the aggregator returns all the groups'
answers with references to their source contexts, so that the reader judges; it filters none
for correctness and ranks none by how many contexts a group holds. Its reranker deals the
contexts left after the counterfactual split evenly across the groups (§4, Reranker), so a
group's size says nothing for its answer: filler dealt into a group must not carry it.

The rule here:
- a group's answer is carried by the contexts it cites (checked to be in the group) and those
  the reranker dropped in their favour (`supported_by`, which CORG writes); a CORG group that
  cites none is carried by its counterfactual side; a group with neither counts as one
  unreferenced voice. An answer's support is its carriers' share of every answer's carriers.
- groups agree (one distinct first answer): one confident answer; share = the share of groups
  that answered (a failed group's side is unknown).
- groups conflict (different first answers; yes/no and factoid): the decision is plural
  (`plural`, `conflict`) and keeps every answer with its references, best supported first;
  `why` states the conflict. A yes/no conflict claims neither side: share 0, below any gate,
  so synthesis.mode "vote" never makes it a confident yes or no. A plural factoid keeps every
  distinct answer (BioASQ takes five); its share is the first answer's support (times the
  share of groups that answered).
- list: the union of the groups' items; summary: the groups' answers, joined.
- a group the ensemble answered (organize.corg_answers "ensemble") carries its strategy's
  share of the group's members behind its answer: the decision's share is multiplied by the
  mean share of the groups giving its first answer, so a group split 3 to 2 is no surer than
  the same vote over the top-m. A group organize answered in one call counts 1.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from infra.bioasq.answers import normalize_answer
from nodes.relations_and_votes import DecidedAnswer, Decision, Group


def answered(group: Group) -> bool:
    """Return whether a group's call gave an answer."""
    return bool(group.get("answer") or group.get("exact"))


def supported_by(group: Group, cited: Collection[str]) -> list[str]:
    """Return the PMIDs carrying a CORG group's answer, never those dealt in to even groups.

    They are the contexts the answer cites, else the group's counterfactual side (`rivals`),
    with those dropped in their favour (`twins`), in rank order. The paper's aggregator
    answers with references to the source contexts (§4); the contexts dealt in are there to
    be read, and a group holding more of them says no more.
    """
    carrying = [p for p in group["pmids"] if p in cited] or list(group.get("rivals") or [])
    twins = group.get("twins") or {}
    behind = {t for p in carrying for t in twins.get(p, [])}
    return [p for p in group.get("covers") or group["pmids"] if p in carrying or p in behind]


def carriers(group: Group, k: int) -> list[str]:
    """Return what carries group k's answer: its supporting PMIDs, else one unreferenced voice.

    A baseline group (no `supported_by`) is carried by what it cites, or by its one context.
    """
    if "supported_by" in group:
        found = list(group["supported_by"])
    else:
        found = list(group.get("cited") or (group["pmids"] if len(group["pmids"]) == 1 else []))
    return found or [f"#{k}"]  # "#k" is no PMID: it counts, and is never cited


def aggregate(
    groups: list[Group],
    qtype: str,
    *,
    strategy: str = "corg",
    settings: dict[str, Any] | None = None,
    source: Literal["organize", "ensemble"] = "organize",
    orders: list[list[str]] | None = None,
) -> Decision:
    """Return the decision the group answers make: all answers with the contexts carrying them.

    Args:
        groups: The answered groups, in the order organize formed them.
        qtype: The question type: yesno and factoid keep answers apart; list and summary join.
        strategy: The strategy that answered the groups: organize's, or the ensemble's.
        settings: Every setting of that strategy, recorded in the decision.
        source: Who answered the groups: organize's calls, or the ensemble's members.
        orders: Per group, the evidence order its answer chose (default: its PMIDs).
    """
    done = [k for k, g in enumerate(groups) if answered(g)]
    # A failed group's side is unknown: agreement among the rest is only that sure.
    heard = len(done) / len(groups) if groups else 0.0
    if qtype in ("list", "summary") or not any(g.get("exact") for g in groups):
        answers = _all_in_one(groups, done, qtype)
        ranked, conflict = list(range(len(groups))), []
        share = heard * _sure(groups, done) if answers else 0.0
    else:
        answers, ranked = _ranked(groups, done)
        conflict = _conflict(groups, done)
        giving = [k for k in done if answers and _gives(groups[k], answers[0]["answer"])]
        if not answers or (conflict and qtype == "yesno"):
            share = 0.0
        else:
            share = answers[0]["support"] * heard * _sure(groups, giving)
    evidence = orders or [g["pmids"] for g in groups]
    decision: Decision = {
        "strategy": strategy,
        "answers": answers,
        "order": list(
            dict.fromkeys(p for k in ranked for p in [*evidence[k], *groups[k]["pmids"]])
        ),
        "why": _why(strategy, source, groups, done, answers, conflict, qtype),
        "settings": dict(settings or {}),
        "source": source,
        "share": round(share, 4),
    }
    if conflict:
        decision |= {"plural": True, "conflict": conflict}
    return decision


def _items(group: Group) -> list[str]:
    return group.get("exact") or [group["answer"]]


def _gives(group: Group, answer: str | list[str]) -> bool:
    return isinstance(answer, str) and _key(answer) in {_key(i) for i in _items(group)}


def _sure(groups: list[Group], ks: list[int]) -> float:
    """Return the mean share of these groups' voters behind their answers (1 without a vote)."""
    shares = [float(groups[k].get("share", 1.0)) for k in ks]
    return sum(shares) / len(shares) if shares else 1.0


def _key(item: str) -> str:
    return normalize_answer(item) or item


def _conflict(groups: list[Group], done: list[int]) -> list[str]:
    """Return the groups' distinct first answers when they differ, else []."""
    firsts: dict[str, str] = {}
    for k in done:
        item = _items(groups[k])[0]
        firsts.setdefault(_key(item), item)
    return list(firsts.values()) if len(firsts) > 1 else []


def _ranked(groups: list[Group], done: list[int]) -> tuple[list[DecidedAnswer], list[int]]:
    """Rank the groups' distinct short answers by the contexts that carry them."""
    carried = {k: carriers(groups[k], k) for k in done}
    everyone = {c for k in done for c in carried[k]}
    found: dict[str, dict[str, Any]] = {}
    for k in done:
        for position, item in enumerate(_items(groups[k])):
            row = found.setdefault(
                _key(item), {"answer": item, "by": [], "groups": [], "first": (k, position)}
            )
            if k not in row["groups"]:
                row["groups"].append(k)
                row["by"] = list(dict.fromkeys([*row["by"], *carried[k]]))
    rows = sorted(found.values(), key=lambda r: (-len(r["by"]), r["first"]))
    answers: list[DecidedAnswer] = [
        {
            "answer": r["answer"],
            "support": round(len(r["by"]) / len(everyone), 4),
            "cited": [p for p in r["by"] if not p.startswith("#")],
        }
        for r in rows
    ]
    ranked = list(dict.fromkeys(k for r in rows for k in r["groups"]))
    ranked += [k for k in range(len(groups)) if k not in ranked]
    return answers, ranked


def _all_in_one(groups: list[Group], done: list[int], qtype: str) -> list[DecidedAnswer]:
    """Keep every group's answers in one: a list's items, or a summary's parts, group by group."""
    if not done:
        return []
    cited = [p for k in done for p in carriers(groups[k], k) if not p.startswith("#")]
    if qtype == "list":
        items: dict[str, str] = {}
        for k in done:
            for item in _items(groups[k]):
                items.setdefault(_key(item), item)
        answer: str | list[str] = list(items.values())
    else:
        answer = "; ".join(groups[k]["answer"] for k in done if groups[k]["answer"])
    support = round(len(done) / len(groups), 4)
    return [{"answer": answer, "support": support, "cited": list(dict.fromkeys(cited))}]


def stated(answers: list[DecidedAnswer]) -> str:
    """Return every answer with its references, as one line: how a plural decision reads."""
    parts = []
    for row in answers:
        text = row["answer"] if isinstance(row["answer"], str) else "; ".join(row["answer"])
        refs = f" (PMIDs {', '.join(row['cited'])})" if row["cited"] else " (unreferenced)"
        parts.append(f"{text[:60]!r}{refs}")
    return "; ".join(parts)


def _why(
    strategy: str,
    source: str,
    groups: list[Group],
    done: list[int],
    answers: list[DecidedAnswer],
    conflict: list[str],
    qtype: str,
) -> str:
    who = strategy if source == "organize" else f"{strategy} in each CORG group"
    head = f"{who}: {len(done)} of {len(groups)} group(s) answered apart"
    if not answers:
        return f"{head}; none gave an answer"
    if not conflict:
        agree = " and agree" if len(done) > 1 else ""
        return f"{head}{agree}, with citations: {stated(answers[:3])}"
    claim = (
        "a yes/no conflict decides neither side"
        if qtype == "yesno"
        else "every answer is kept, best carried first"
    )
    return f"{head} and conflict: {stated(answers[:5])}; {claim}"
