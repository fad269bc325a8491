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
    with saver(path) as checkpointer:
        graph = build_graph(checkpointer=checkpointer)
        history = list(graph.get_state_history({"configurable": {"thread_id": thread_id}}))
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
