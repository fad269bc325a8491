"""Traces: a finished (or interrupted) run read back from its checkpoints, node by node."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from graphs.qa import build_graph
from infra.checkpoints import saver, thread_exists
from infra.settings import Settings


class UnknownThread(LookupError):
    """No run has this thread id."""


def node_updates(settings: Settings, thread_id: str) -> list[dict[str, Any]]:
    """Return the run's node updates in execution order: node, step, started, seconds, update."""
    path = settings.checkpoint_path
    if not thread_exists(path, thread_id):
        raise UnknownThread(f"no run with thread id {thread_id!r} in {path}")
    config = {"configurable": {"thread_id": thread_id}}
    with saver(path) as checkpointer:
        latest = checkpointer.get_tuple(config)
        # A BioASQ batch records its phase; its graph is the one that can replay the thread.
        phase = (latest.metadata or {}).get("phase", "A+") if latest else "A+"
        graph = build_graph(checkpointer=checkpointer, phase=phase)
        history = list(graph.get_state_history(config))
    history.reverse()
    steps = []
    for i, snapshot in enumerate(history):
        finished = history[i + 1].created_at if i + 1 < len(history) else None
        for task in snapshot.tasks:
            if task.name.startswith("__") or task.result is None:
                continue
            steps.append(
                {
                    "node": task.name,
                    "step": snapshot.metadata.get("step"),
                    "started": snapshot.created_at,
                    "seconds": _seconds(snapshot.created_at, finished),
                    "update": task.result,
                }
            )
    return steps


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 3)


def describe_organize(update: dict[str, Any]) -> list[str]:
    """Return readable lines for an organize update: the relation graph, then the groups."""
    lines: list[str] = []
    graph = update.get("relation_graph")
    if graph:
        pmids = graph.get("pmids", [])

        def name(i: int) -> str:
            return f"[{i + 1}] {pmids[i]}" if i < len(pmids) else f"[{i + 1}]"

        anchors = ", ".join(name(i) for i in graph.get("rounds", []))
        lines.append(
            f"relation graph: {graph['n']} contexts, {graph['calls']} relation calls for "
            f"{graph['naive_calls']} pairs; anchors {anchors or '-'}"
        )
        for edge in graph.get("edges", []):
            a, b = edge["pair"]
            how = edge["source"]
            if edge.get("via") is not None:
                how += f" via {name(edge['via'])}"
            if edge.get("error"):
                how += f" ({edge['error'][:80]})"
            lines.append(f"  {name(a)} ~ {name(b)}: {edge['label']} ({how})")
    elif update.get("relations"):
        for r in update["relations"]:
            state = "applied" if r.get("applied", True) else "not applied"
            lines.append(f"  {r['a']} ~ {r['b']}: {r['label']} ({state})")
    for number, group in enumerate(update.get("groups") or [], 1):
        lines.append(f"group {number}: {', '.join(group['pmids'])}")
        if group.get("question"):
            lines.append(f"  asks: {group['question']}")
        cited = f" [{', '.join(group['cited'])}]" if group.get("cited") else ""
        answer = group.get("answer") or f"(no answer: {group.get('error') or 'empty'})"
        lines.append(f"  answer: {answer}{cited}")
    return lines


def describe_ensemble(update: dict[str, Any]) -> list[str]:
    """Return readable lines for an ensemble update: each member's view and output, the vote."""
    votes = update.get("votes") or {}
    members = update.get("members") or []
    lines = [
        f"strategy {votes.get('strategy', '?')}: {len(members)} member call(s), agreement "
        f"{votes.get('agreement', 0):.2f}, {votes.get('distinct', 0)} distinct answer(s)"
    ]
    for m in members:
        said = "; ".join(m.get("answer") or []) or "-"
        cited = f" cites {', '.join(m['pmids'])}" if m.get("pmids") else ""
        outcome = f"ERROR {m['error']}" if m.get("error") else f"{said}{cited}"
        lines.append(
            f"  {m['model']} view {m['view']} [{' '.join(m['order'])}] "
            f"t={m.get('temperature', 0):g} {m.get('latency_s', 0):.2f}s: {outcome}"
        )
    lines.append("vote table:")
    for row in votes.get("table", []):
        variants = f" (as {', '.join(row['variants'])})" if row.get("variants") else ""
        lines.append(f"  {row['votes']:>3}  {row['answer']}{variants}")
    if ccv := votes.get("ccv"):
        lines.append(
            f"citation-consistent vote ({ccv['evidence']}): winner {ccv['winner']!r}, "
            f"citation agreement {ccv['citation_agreement']:.2f}"
        )
        for row in ccv["table"]:
            lines.append(
                f"  score {row['score']} (said {row['frequency']}x, cites {row['pmid']}): "
                f"{row['answer']}"
            )
    for name, fit in (votes.get("moi") or {}).items():
        weights = ", ".join(f"{w:.2f}" for w in fit["position_weights"])
        utilities = ", ".join(f"{p} {u:.2f}" for p, u in fit["utilities"].items())
        lines.append(f"MoI {name}: position weights [{weights}]; utilities {utilities}")
        lines.append(f"  debiased order: {' '.join(fit['order'])}")
    lines.append(f"ranked: {'; '.join(votes.get('ranked', [])) or '-'}")
    return lines


def describe_synthesize(update: dict[str, Any]) -> list[str]:
    """Return readable lines for a synthesis attempt: temperature, answer, confidence, why."""
    lines = []
    for attempt in update.get("attempts", []):
        answer = attempt.get("answer") or {}
        again = " (again, at temperature 0)" if attempt["temperature"] == 0 else ""
        lines.append(
            f"attempt in round {attempt['round']} at temperature {attempt['temperature']:g}"
            f"{again}: confidence {answer.get('confidence', 0):.2f} from {answer.get('source')}"
        )
        if attempt.get("error"):
            lines.append(f"  error: {attempt['error']}")
        if answer.get("extracted") and answer.get("extracted") != answer.get("exact"):
            lines.append(f"  extracted: {'; '.join(answer['extracted'])}")
        lines.append(f"  exact: {'; '.join(answer.get('exact') or []) or '-'}")
        lines.append(f"  ideal: {answer.get('ideal') or '-'}")
        if answer.get("rationale"):
            lines.append(f"  rationale: {answer['rationale']}")
        if answer.get("cited"):
            lines.append(f"  cites: {', '.join(answer['cited'])}")
    return lines


DESCRIBERS = {
    "organize": (describe_organize, frozenset({"relation_graph", "relations", "groups"})),
    "ensemble": (describe_ensemble, frozenset({"members", "votes"})),
    "synthesize": (describe_synthesize, frozenset({"attempts", "answer"})),
}
"""Nodes whose updates read better as lines than as raw JSON, and the keys the lines cover."""
