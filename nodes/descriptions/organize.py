"""How organize is described: its strategy, the relation graph, the groups, the aggregate."""

from __future__ import annotations

from typing import Any

from nodes.describing import NodeDescription, describes, plural
from nodes.trace_view import Block, Facts, Lines, RelationGraph, Table, decision_blocks

COVERS = frozenset({"relation_graph", "relations", "groups", "decision"})
"""The update's keys these blocks show (the rest is shown as it is)."""
CHOSEN = "organize: strategy "
"""How the node's first note begins: the strategy that ran, and why (organize.strategy)."""


def organize_trace(update: dict[str, Any]) -> list[Block]:
    """Return organize's blocks: the strategy, relations (a graph for CORG), groups, decision."""
    chosen = [n for n in update.get("notes") or [] if str(n).startswith(CHOSEN)]
    blocks: list[Block] = [Facts(chosen[0].removeprefix("organize: "))] if chosen else []
    if graph := update.get("relation_graph"):
        blocks.append(RelationGraph.of(graph))
    elif update.get("relations"):
        rows = tuple(
            (
                str(r["a"]),
                str(r["b"]),
                str(r["label"]),
                "applied" if r.get("applied", True) else "not applied",
            )
            for r in update["relations"]
        )
        blocks.append(Table("Relations", ("context", "context", "label", "state"), rows))
    groups = []
    for number, group in enumerate(update.get("groups") or [], 1):
        groups.append(f"group {number}: {', '.join(group['pmids'])}")
        if group.get("question"):
            groups.append(f"  asks: {group['question']}")
        cited = f" [{', '.join(group['cited'])}]" if group.get("cited") else ""
        answer = group.get("answer") or f"(no answer: {group.get('error') or 'empty'})"
        if group.get("answered_by") == "ensemble" and not group.get("answer"):
            answer = "(the ensemble's to answer: organize.corg_answers 'ensemble')"
        groups.append(f"  answer: {answer}{cited}")
        if group.get("exact"):
            groups.append(f"  exact: {'; '.join(group['exact'])}")
        if len(group.get("covers") or []) > len(group["pmids"]):
            groups.append(f"  stands for: {', '.join(group['covers'])}")
    if groups:
        blocks.append(Lines(tuple(groups)))
    return blocks + decision_blocks(update.get("decision"), title="aggregate")


def _organize_done(update: dict[str, Any]) -> str:
    kept = plural(len(update.get("organized") or []), "context")
    groups = update.get("groups") or []
    return f"organized {kept}" + (f" into {plural(len(groups), 'group')}" if groups else "")


def _organize_summary(update: dict[str, Any]) -> list[str]:
    if update.get("groups"):
        return [f"{len(update['groups'])} groups"]
    if "organized" in update:
        return [f"{len(update['organized'])} contexts kept"]
    return []


describes(
    "organize",
    NodeDescription(
        "organizing contexts",
        done=_organize_done,
        summary=_organize_summary,
        trace=organize_trace,
        covers=COVERS,
    ),
)
