"""Traces: a finished (or interrupted) run read back from its checkpoints, node by node.

Read without the graph: checkpoints, records and what each node wrote are all a trace needs, so
`trace list` and `trace show` load neither the graph nor a node's machinery
(tests/unit/test_trace_reading.py).
"""

import os
import socket
import sqlite3
import time
from datetime import datetime
from typing import Any, TypedDict

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

from infra.checkpoints import read_config, saver, task_nodes, thread_checkpoints, thread_exists
from infra.settings import Settings
from nodes.records import model_failed
from nodes.state import QAState, Result

THREAD_TAGS = ("conversation", "turn", "bioasq_id", "phase")
"""Metadata some runs carry: chat turns (conversation, turn), BioASQ batches (bioasq_id, phase)."""
STATE_KEYS = QAState.__required_keys__ | QAState.__optional_keys__
"""The state's keys: a node's writes to them are its update (the rest are LangGraph's edges)."""
NOT_OUTPUT = frozenset({"__error__", "__error_source_node__", "__interrupt__", "__resume__"})
"""A task's writes that say what happened to it, not what it wrote: one with nothing else did not
finish (it raised, or waits at an interrupt), and shows no update."""
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


class Step(TypedDict):
    """One node's run, read back from the checkpoints."""

    node: str
    """The node that ran."""
    step: int | None
    """The graph step it ran in."""
    started: str
    """When the step began (ISO 8601)."""
    seconds: float | None
    """How long until the next checkpoint (None for the last)."""
    update: QAState
    """What the node returned: a part of the state."""


class ThreadSummary(TypedDict):
    """A run in one line, as `quorum trace list` shows it."""

    thread_id: str
    """The run's thread."""
    question: str | None
    """The question asked."""
    type: str | None
    """The question's BioASQ type."""
    started: str | None
    """When the first checkpoint was written (ISO 8601)."""
    status: str
    """finished, failed (a node raised, or no model answered: `error` says what), in progress,
    interrupted (its process is gone, or its last step is old), or unreadable."""
    error: str | None
    """What a failed node raised, or why an unreadable thread could not be read."""
    answer: str | None
    """The answer in one line (`answer_text`)."""
    calls: int
    """Model calls made."""
    input_tokens: int
    """Prompt tokens of those calls."""
    output_tokens: int
    """Completion tokens of those calls."""
    tokens: int
    """Input plus output tokens."""
    seconds: float | None
    """First to last checkpoint."""
    checkpoints: int
    """Checkpoints written."""
    conversation: str | None
    """Chat: the conversation the run is a turn of."""
    turn: int | None
    """Chat: the turn's number."""
    bioasq_id: str | None
    """BioASQ batch: the question's id."""
    phase: str | None
    """BioASQ batch: the phase run."""


def node_updates(settings: Settings, thread_id: str) -> list[Step]:
    """Return the run's node updates in execution order: node, step, started, seconds, update."""
    path = settings.checkpoint_path
    if not thread_exists(path, thread_id):
        raise UnknownThread(f"no run with thread id {thread_id!r} in {path}")
    with saver(path) as checkpointer:
        checkpoints = thread_checkpoints(checkpointer, thread_id)
        nodes = task_nodes(checkpointer, thread_id)
    steps = []
    for i, saved in enumerate(checkpoints):
        started = saved.checkpoint["ts"]
        finished = checkpoints[i + 1].checkpoint["ts"] if i + 1 < len(checkpoints) else None
        # A node's writes are kept with the checkpoint its step began from.
        writes: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in saved.pending_writes or []:
            if task_id in nodes and not nodes[task_id].startswith("__"):
                writes.setdefault(task_id, []).append((channel, value))
        for task_id, written in writes.items():
            if all(channel in NOT_OUTPUT for channel, _ in written):
                continue
            steps.append(
                Step(
                    node=nodes[task_id],
                    step=(saved.metadata or {}).get("step"),
                    started=started,
                    seconds=_seconds(started, finished),
                    update={k: v for k, v in written if k in STATE_KEYS},
                )
            )
    return steps


def thread_question(settings: Settings, thread_id: str) -> str:
    """Return the question a run was asked, in the user's words."""
    path = settings.checkpoint_path
    if not thread_exists(path, thread_id):
        raise UnknownThread(f"no run with thread id {thread_id!r} in {path}")
    with saver(path) as checkpointer:
        latest = checkpointer.get_tuple(read_config(thread_id))
    if latest is None:
        return ""
    values = latest.checkpoint.get("channel_values") or {}
    metadata = latest.metadata or {}
    return values.get("asked") or values.get("question") or metadata.get("question") or ""


def list_threads(settings: Settings, *, limit: int = 20) -> list[ThreadSummary]:
    """Return summaries of the `limit` most recently started runs, newest first.

    Each has thread_id, question, started, status (finished, failed, in progress, interrupted),
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
) -> ThreadSummary:
    summary: ThreadSummary = {
        "thread_id": thread_id,
        "question": None,
        "type": None,
        "started": None,
        "status": "unreadable",
        "error": None,
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
        "status": _status(result, last, ended, metadata),
        "error": _raised(last)
        or (result.get("insufficient_reason") if model_failed(result) else None),
        "answer": answer_text(result) if result and not model_failed(result) else None,
        "calls": len(calls),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "tokens": input_tokens + output_tokens,
        "seconds": _seconds(started, ended),
        **{tag: metadata.get(tag) for tag in THREAD_TAGS},
    }


def _checkpoint(checkpointer: SqliteSaver, thread_id: str, checkpoint_id: str) -> CheckpointTuple:
    found = checkpointer.get_tuple(read_config(thread_id, checkpoint_id))
    if found is None:
        raise LookupError(f"checkpoint {checkpoint_id} of {thread_id} vanished")
    return found


def _status(
    result: Result, last: CheckpointTuple, ended: str | None, metadata: dict[str, Any]
) -> str:
    if result and model_failed(result):
        return "failed"  # no model answered: nothing there is an answer
    if result:
        return "finished"
    if _raised(last) is not None:
        return "failed"
    if _process_gone(metadata):
        return "interrupted"
    if ended and time.time() - datetime.fromisoformat(ended).timestamp() < STALE_AFTER_S:
        return "in progress"
    return "interrupted"


def _process_gone(metadata: dict[str, Any]) -> bool:
    """Return whether the process that ran the thread (graphs.runtime.thread_config) is gone."""
    pid, host = metadata.get("pid"), metadata.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return False  # an older run, or another machine's: the age of its last step decides
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def _raised(last: CheckpointTuple) -> str | None:
    """Return what a node raised in the run's last step: LangGraph keeps it as a pending write."""
    errors = [str(v) for _, channel, v in last.pending_writes or [] if channel == "__error__"]
    return errors[0] if errors else None


def answer_text(result: Result) -> str:
    """Return a run's answer in one line: the exact answer, else the ideal one's first 80 chars."""
    exact = result.get("exact_answer")
    if isinstance(exact, str) and exact:
        return exact
    if isinstance(exact, list) and exact:
        return "; ".join(str(a[0]) if isinstance(a, list) and a else str(a) for a in exact)
    return (result.get("ideal_answer") or "")[:80]


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 3)
