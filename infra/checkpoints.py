"""Checkpoints: every run's state after every step, in one SQLite file under the data directory."""

from __future__ import annotations

import sqlite3
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver


@asynccontextmanager
async def async_saver(path: Path):
    """Open the async checkpointer used while a graph runs."""
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
