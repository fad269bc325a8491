"""Traces: a finished (or interrupted) run read back from its checkpoints, node by node."""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime
from functools import cache
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

from graphs.qa import build_graph
from infra.bioasq.types import PHASES
from infra.checkpoints import saver, thread_exists
from infra.settings import Settings

THREAD_TAGS = ("conversation", "turn", "bioasq_id", "phase")
"""Metadata some runs carry: chat turns (conversation, turn), BioASQ batches (bioasq_id, phase)."""
STALE_AFTER_S = 900.0
"""A run with no result whose last checkpoint is older than this is reported interrupted."""
# Checkpoint ids are uuid6, so their text order is their time order (LangGraph relies on it too).
# Only the primary-key index is read here, never a state blob, however many threads there are.
NEWEST_THREADS = """
    SELECT thread_id, MIN(checkpoint_id), MAX(checkpoint_id), COUNT(*)
    FROM checkpoints WHERE checkpoint_ns = ''
    GROUP BY thread_id ORDER BY MIN(checkpoint_id) DESC LIMIT ?
"""


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


def thread_question(settings: Settings, thread_id: str) -> str:
    """Return the question a run was asked, in the user's words."""
    path = settings.checkpoint_path
    if not thread_exists(path, thread_id):
        raise UnknownThread(f"no run with thread id {thread_id!r} in {path}")
    with saver(path) as checkpointer:
        latest = checkpointer.get_tuple({"configurable": {"thread_id": thread_id}})
    if latest is None:
        return ""
    values = latest.checkpoint.get("channel_values") or {}
    metadata = latest.metadata or {}
    return values.get("asked") or values.get("question") or metadata.get("question") or ""


def list_threads(settings: Settings, *, limit: int = 20) -> list[dict[str, Any]]:
    """Return summaries of the `limit` most recently started runs, newest first.

    Each has thread_id, question, started, status (finished, in progress, interrupted),
    answer, calls, tokens, seconds (first to last checkpoint) and the thread's tags.
    """
    path = settings.checkpoint_path
    if not path.exists():
        return []
    with saver(path) as checkpointer:
        try:
            rows = checkpointer.conn.execute(NEWEST_THREADS, (limit,)).fetchall()
        except sqlite3.OperationalError:  # the file exists but no run was ever checkpointed
            return []
        return [_summary(checkpointer, *row) for row in rows]


def _summary(
    checkpointer: SqliteSaver, thread_id: str, first_id: str, last_id: str, checkpoints: int
) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "thread_id": thread_id,
        "question": None,
        "type": None,
        "started": None,
        "status": "unreadable",
        "answer": None,
        "calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "tokens": 0,
        "seconds": None,
        "checkpoints": checkpoints,
        **dict.fromkeys(THREAD_TAGS),
    }
    try:
        first = _checkpoint(checkpointer, thread_id, first_id)
        last = _checkpoint(checkpointer, thread_id, last_id)
    except Exception as exc:  # one unreadable thread must not hide the others
        return summary | {"error": f"{type(exc).__name__}: {exc}"}
    values = last.checkpoint.get("channel_values") or {}
    metadata = last.metadata or {}
    calls = values.get("calls") or []
    input_tokens = sum(int(c.get("input_tokens") or 0) for c in calls)
    output_tokens = sum(int(c.get("output_tokens") or 0) for c in calls)
    started, ended = first.checkpoint.get("ts"), last.checkpoint.get("ts")
    result = values.get("result") or {}
    return summary | {
        "question": metadata.get("question") or values.get("question"),
        "type": result.get("type") or values.get("qtype"),
        "started": started,
        "status": _status(result, last, ended),
        "answer": answer_text(result) if result else None,
        "calls": len(calls),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "tokens": input_tokens + output_tokens,
        "seconds": _seconds(started, ended),
        **{tag: metadata.get(tag) for tag in THREAD_TAGS},
    }


def _checkpoint(checkpointer: SqliteSaver, thread_id: str, checkpoint_id: str) -> CheckpointTuple:
    config = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }
    found = checkpointer.get_tuple(config)
    if found is None:
        raise LookupError(f"checkpoint {checkpoint_id} of {thread_id} vanished")
    return found


def _status(result: dict[str, Any], last: CheckpointTuple, ended: str | None) -> str:
    if result:
        return "finished"
    # A node that raised leaves its error as a pending write of the last checkpoint.
    if any(channel == "__error__" for _, channel, _ in last.pending_writes or []):
        return "interrupted"
    if ended and time.time() - datetime.fromisoformat(ended).timestamp() < STALE_AFTER_S:
        return "in progress"
    return "interrupted"


def answer_text(result: dict[str, Any]) -> str:
    """Return a run's answer in one line: the exact answer, else the ideal one's first 80 chars."""
    exact = result.get("exact_answer")
    if isinstance(exact, str) and exact:
        return exact
    if isinstance(exact, list) and exact:
        return "; ".join(str(a[0]) if isinstance(a, list) and a else str(a) for a in exact)
    return (result.get("ideal_answer") or "")[:80]


@cache
def node_names() -> tuple[str, ...]:
    """Return every node a QA graph of any phase can run, in the order they are added."""
    names: dict[str, None] = {}
    for phase in PHASES:
        names |= dict.fromkeys(n for n in build_graph(phase=phase).nodes if not n.startswith("__"))
    return tuple(names)


def describe_call(call: dict[str, Any]) -> list[str]:
    """Return readable lines for one model call: model and cost, each prompt message, raw output."""
    tokens = f"{call.get('input_tokens') or 0} in + {call.get('output_tokens') or 0} out tokens"
    temperature = call.get("temperature")
    head = [
        call.get("model") or "?",
        f"kind {call['kind']}" if call.get("kind") else None,
        f"temperature {temperature:g}" if temperature is not None else "default temperature",
        f"{call.get('latency_s') or 0:.2f}s",
        tokens,
    ]
    lines = [", ".join(part for part in head if part)]
    for message in call.get("prompt") or []:
        lines.append(f"[{message.get('role', '?')}]")
        lines.extend(f"  {line}" for line in str(message.get("content", "")).splitlines())
    if call.get("raw"):
        lines.append("[raw output]")
        lines.extend(f"  {line}" for line in str(call["raw"]).splitlines())
    if call.get("error"):
        lines.append(f"[error] {call['error']}")
    return lines


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
