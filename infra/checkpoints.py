"""Checkpoints: every run's state after every step, in one SQLite file under the data directory.

What a run wrote is read back here without the graph (`trace list`, `trace show`): a thread's
checkpoints, oldest first, and which node each task that wrote to them ran.
"""

from __future__ import annotations

import sqlite3
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

NODE_TASK = "~__pregel_pull"
"""How LangGraph's writes table begins the path of a task that ran a node (`~__pregel_pull,
<node>`); tests/unit/test_trace_reading.py holds the reading equal to LangGraph's own history."""


@asynccontextmanager
async def async_saver(path: Path):
    """Open the async checkpointer used while a graph runs."""
    # Imported here: reading a trace never opens the async saver (nor loads aiosqlite).
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        yield saver


@contextmanager
def saver(path: Path):
    """Open the checkpointer read-side (traces); the file must exist."""
    if not path.exists():
        raise FileNotFoundError(f"no checkpoints at {path}")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def thread_exists(path: Path, thread_id: str) -> bool:
    """Tell whether any checkpoint belongs to this thread."""
    if not path.exists():
        return False
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        try:
            row = conn.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,)
            ).fetchone()
        except sqlite3.OperationalError:
            return False
    return row is not None


def read_config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    """Return the config that reads a thread's checkpoints (its latest, or `checkpoint_id`)."""
    found: dict[str, Any] = {"thread_id": thread_id}
    if checkpoint_id is not None:
        found |= {"checkpoint_ns": "", "checkpoint_id": checkpoint_id}
    return {"configurable": found}


def thread_checkpoints(checkpointer: SqliteSaver, thread_id: str) -> list[CheckpointTuple]:
    """Return a thread's checkpoints, oldest first, each with the writes of the tasks it began."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return list(checkpointer.list(config))[::-1]


def task_nodes(checkpointer: SqliteSaver, thread_id: str) -> dict[str, str]:
    """Return the node each task of a thread ran, by task id (tasks that ran a node only)."""
    rows = checkpointer.conn.execute(
        "SELECT DISTINCT task_id, task_path FROM writes WHERE thread_id = ? AND checkpoint_ns = ''",
        (thread_id,),
    ).fetchall()
    found = {}
    for task_id, path in rows:
        kind, _, node = str(path).partition(", ")
        if kind == NODE_TASK and node and ", " not in node:
            found[task_id] = node
    return found
