"""How the ensemble is described: members, vote, CCV and MoI (per CORG group), decision."""

from __future__ import annotations

from typing import Any

from nodes.describing import NodeDescription, Outcome, describes, plural
from nodes.state import Member
from nodes.trace_view import Block, Facts, Table, cell, decision_blocks

COVERS = frozenset({"members", "votes", "decision", "groups"})
"""The update's keys these blocks show (the rest is shown as it is)."""

MEMBER_COLUMNS = ("model", "view", "order", "t", "answer", "cites", "error", "latency s", "tokens")


def ensemble_trace(update: dict[str, Any]) -> list[Block]:
    """Return the ensemble's blocks: facts of the vote, its table, members, CCV, MoI, decision.

    Where the strategy answered CORG's groups: per group, what it asked, its vote, members and
    decision; then the aggregate of the group decisions.
    """
    votes = update.get("votes") or {}
    members = [m for m in update.get("members") or [] if isinstance(m, dict)]
    if votes.get("groups"):
        answered = [g for g in update.get("groups") or [] if isinstance(g, dict)]
        return _in_groups(votes, members, answered) + decision_blocks(
            update.get("decision"), title="aggregate"
        )
    return _voted(votes, members) + decision_blocks(update.get("decision"))


def _in_groups(
    votes: dict[str, Any], members: list[Member], answered: list[dict[str, Any]]
) -> list[Block]:
    groups = [g for g in votes["groups"] if isinstance(g, dict)]
    facts = [f"{len(members)} member call(s)", f"{votes.get('members', 0)} answered"]
    if votes.get("failed"):
        facts.append(f"{votes['failed']} failed")
    blocks: list[Block] = [
        Facts(
            f"strategy {votes.get('strategy', '?')} in each of {plural(len(groups), 'CORG group')}"
            f": {', '.join(facts)}"
        )
    ]
    for group in groups:
        number = group["group"]
        mine = [m for m in members if m.get("group") == number]
        blocks.append(
            Facts(f"group {number}: {', '.join(group['pmids'])}; asks: {group['question']}")
        )
        blocks += _voted(group.get("votes") or {}, mine, heading=f", group {number}")
        blocks += decision_blocks(group.get("decision"), title=f"group {number} decision")
        if number <= len(answered) and (carried := answered[number - 1].get("supported_by")):
            blocks.append(Facts(f"group {number} answer carried by: {', '.join(carried)}"))
    return blocks


def _voted(votes: dict[str, Any], members: list[Member], heading: str = "") -> list[Block]:
    blocks: list[Block] = []
    if votes or members:
        facts = [f"{len(members)} member call(s)"]
        if isinstance(votes.get("agreement"), int | float):
            facts.append(f"agreement {votes['agreement']:.2f}")
        facts.append(f"{votes.get('distinct', '?')} distinct answer(s)")
        if votes.get("failed"):
            facts.append(f"{votes['failed']} failed member(s)")
        blocks.append(Facts(f"strategy {votes.get('strategy', '?')}: {', '.join(facts)}"))
    table = [r for r in votes.get("table") or [] if isinstance(r, dict)]
    if table:
        extra = tuple(dict.fromkeys(k for r in table for k in r if k not in ("answer", "votes")))
        rows = tuple(
            (cell(r.get("answer")), cell(r.get("votes")), *(cell(r.get(k)) for k in extra))
            for r in table
        )
        blocks.append(
            Table(f"Vote table{heading}", ("answer", "votes", *extra), rows, frozenset({1}))
        )
    if members:
        rows = tuple(map(_member, members))
        blocks.append(Table(f"Members{heading}", MEMBER_COLUMNS, rows, _NUMBERS))
    blocks += _ccv(votes.get("ccv"))
    for name, fit in (votes.get("moi") or {}).items():
        weights = ", ".join(f"{w:.2f}" for w in fit["position_weights"])
        utilities = ", ".join(f"{p} {u:.2f}" for p, u in fit["utilities"].items())
        blocks.append(Facts(f"MoI {name}: position weights [{weights}]; utilities {utilities}"))
        if fit.get("orientation"):
            blocks.append(Facts(f"MoI {name} oriented by: {fit['orientation']}"))
        blocks.append(Facts(f"MoI {name} debiased order: {' '.join(fit['order'])}"))
    if votes:
        blocks.append(Facts(f"ranked: {'; '.join(map(str, votes.get('ranked') or [])) or '-'}"))
    return blocks


_NUMBERS = frozenset({1, 3, 7, 8})


def _member(m: Member) -> tuple[str, ...]:
    temperature = m.get("temperature")
    return (
        cell(m.get("model")),
        cell(m.get("view")),
        " ".join(map(str, m.get("order") or [])),
        f"{temperature:g}" if isinstance(temperature, int | float) else "",
        "; ".join(map(str, m.get("answer") or [])) or "-",
        ", ".join(map(str, m.get("pmids") or [])),
        cell(m.get("error")),
        f"{m.get('latency_s') or 0:.2f}",
        cell(m.get("tokens")),
    )


def _ccv(ccv: Any) -> list[Block]:
    if isinstance(ccv, str):  # a question type CCV cannot vote on, and why
        return [Facts(f"citation-consistent vote: not used ({ccv})")]
    if not ccv:
        return []
    rows = tuple(
        (cell(r["score"]), cell(r["frequency"]), cell(r["pmid"]), cell(r["answer"]))
        for r in ccv["table"]
    )
    return [
        Facts(
            f"citation-consistent vote ({ccv['evidence']}): winner {ccv['winner']!r}, "
            f"citation agreement {ccv['citation_agreement']:.2f}"
        ),
        Table(
            "Citation-consistent vote",
            ("score", "said", "cites", "answer"),
            rows,
            frozenset({0, 1}),
        ),
    ]


def _ensemble_outcome(update: dict[str, Any]) -> Outcome:
    if (update.get("decision") or {}).get("source") == "organize":
        return "done"  # organize's groups answered: no member was asked
    members = update.get("members") or []
    if not members:
        return "skipped"  # no contexts to answer from
    answered = any(m.get("error") is None and m.get("answer") for m in members)
    return "done" if answered else "failed"


def _ensemble_done(update: dict[str, Any]) -> str:
    if (update.get("decision") or {}).get("source") == "organize":
        return "ensemble: the group answers decide"
    members = update.get("members") or []
    if not members:
        return f"ensemble: {(update.get('decision') or {}).get('why') or 'no member asked'}"
    if _ensemble_outcome(update) == "failed":
        return f"ensemble: none of {plural(len(members), 'member')} gave an answer"
    votes = update.get("votes") or {}
    answers = plural(votes.get("members", 0), "answer")
    if groups := votes.get("groups"):
        return (
            f"ensemble: {answers} in {plural(len(groups), 'CORG group')}, each decided by its vote"
        )
    return f"ensemble: {answers}, agreement {votes.get('agreement', 0):.2f}"


def _ensemble_summary(update: dict[str, Any]) -> list[str]:
    if "votes" not in update:
        return []
    votes = update["votes"] or {}
    calls = f"{len(update.get('members') or [])} member calls"
    if groups := votes.get("groups"):
        return [f"{calls} in {plural(len(groups), 'group')}"]
    return [f"{calls}, agreement {votes.get('agreement', 0):.2f}"]


describes(
    "ensemble",
    NodeDescription(
        "ensemble answering",
        done=_ensemble_done,
        outcome=_ensemble_outcome,
        summary=_ensemble_summary,
        trace=ensemble_trace,
        covers=COVERS,
    ),
)
