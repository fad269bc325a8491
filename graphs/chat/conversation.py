"""Conversations: turns of chat over a corpus, each turn a checkpointed run of the QA graph.

A conversation is an id and its turns in order; each turn runs the graph in its own checkpoint
thread (`<conversation>-<turn>`, metadata `conversation` and `turn`), because a run's state
accumulates (queries, attempts, the fallback pool) and one question's must not leak into the
next. What carries over is the history: the last turns' questions and answers, against which a
follow-up is rewritten into a standalone question (generate_query). The turns are kept in
`conversations.sqlite` beside the checkpoints, so a conversation can be listed and resumed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graphs.runtime import Progress, run_question
from infra.settings import Settings
from nodes.context import Context
from nodes.state import Exchange, Result


@dataclass(frozen=True)
class Turn:
    """One question of a conversation and what came back."""

    number: int
    asked: str
    question: str
    thread_id: str
    result: Result

    @property
    def answer_text(self) -> str:
        """Return the answer in words, for the history a follow-up is read against."""
        ideal = self.result.get("ideal_answer") or ""
        exact = self.result.get("exact_answer")
        if isinstance(exact, list):
            exact = "; ".join(a[0] if isinstance(a, list) and a else str(a) for a in exact)
        return ideal or str(exact or "")


class Conversations:
    """Turns by conversation id, in one SQLite file."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._lock = threading.Lock()
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS turns (conversation TEXT, number INTEGER, asked TEXT, "
                "question TEXT, thread_id TEXT, result TEXT, created REAL, "
                "PRIMARY KEY (conversation, number))"
            )

    @classmethod
    def for_settings(cls, settings: Settings) -> Conversations:
        """Open the store under the data directory."""
        return cls(settings.home / "conversations.sqlite")

    @staticmethod
    def new_id() -> str:
        """Return a fresh conversation id."""
        return f"chat-{uuid.uuid4().hex[:12]}"

    def turns(self, conversation: str) -> list[Turn]:
        """Return a conversation's turns in order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT number, asked, question, thread_id, result FROM turns "
                "WHERE conversation = ? ORDER BY number",
                (conversation,),
            ).fetchall()
        return [Turn(n, a, q, t, json.loads(r)) for n, a, q, t, r in rows]

    def add(self, conversation: str, turn: Turn) -> None:
        """Record a finished turn."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO turns VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation,
                    turn.number,
                    turn.asked,
                    turn.question,
                    turn.thread_id,
                    json.dumps(turn.result, ensure_ascii=False),
                    time.time(),
                ),
            )

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()


async def run_turn(
    settings: Settings,
    context: Context,
    store: Conversations,
    conversation: str,
    question: str,
    qtype: str | None = None,
    **callbacks: Callable[..., None] | None,
) -> Turn:
    """Answer the next question of a conversation and record the turn.

    Args:
        settings: Settings of the run.
        context: Dependencies of the run.
        store: Where the turns are kept.
        conversation: The conversation's id.
        question: The user's words (a follow-up is rewritten against the history).
        qtype: The BioASQ type every turn is answered as (detected per question when None).
        **callbacks: on_start, on_event, on_progress, on_token: the run's `Progress`.
    """
    earlier = store.turns(conversation)
    number = len(earlier) + 1
    history = [Exchange(question=t.question, answer=t.answer_text) for t in earlier]
    thread_id, result = await run_question(
        settings,
        question,
        qtype,
        context=context,
        thread_id=f"{conversation}-{number}-{uuid.uuid4().hex[:6]}",
        inputs={"history": history} if history else None,
        metadata={"conversation": conversation, "turn": number},
        progress=Progress(**callbacks),
    )
    turn = Turn(number, question, result.get("question", question), thread_id, result)
    store.add(conversation, turn)
    return turn
