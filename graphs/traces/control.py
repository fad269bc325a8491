"""Driving a run by hand: step through it node by node, or replay it from any node.

Replays may edit the state first (LangGraph time travel).

A replay copies the state as it stood just before the chosen node into a new thread and runs
from there: the earlier nodes' results are reused as they were (no new search, no new model
calls before that node), and the original thread is never written to.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, get_type_hints

from graphs.runtime import GraphRunner, check_question, thread_config
from infra.checkpoints import async_saver, read_config, thread_exists
from infra.errors import UserError
from infra.settings import Settings
from nodes.context import Context
from nodes.state import QAState


class ReplayProblem(UserError):
    """The replay cannot be made as asked (unknown thread, node or field)."""


EDITABLE = frozenset(get_type_hints(QAState, include_extras=False)) - {"limits"}
"""State fields `--set` may change."""


def parse_edits(pairs: list[str]) -> dict[str, Any]:
    """Parse KEY=VALUE pairs; VALUE is JSON when it parses as JSON, else a string."""
    edits: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ReplayProblem(f"--set {pair!r}: expected KEY=VALUE")
        if key not in EDITABLE:
            raise ReplayProblem(
                f"--set {key!r}: not a state field; one of {', '.join(sorted(EDITABLE))}"
            )
        try:
            edits[key] = json.loads(raw)
        except json.JSONDecodeError:
            edits[key] = raw
    return edits


async def replay(
    settings: Settings,
    context: Context,
    thread_id: str,
    from_node: str,
    edits: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Run a finished thread again from `from_node` in a new thread; return (thread, result)."""
    path = settings.checkpoint_path
    if not thread_exists(path, thread_id):
        raise ReplayProblem(f"no run with thread id {thread_id!r} in {path}")
    source = read_config(thread_id)
    async with async_saver(path) as saver:
        latest = await saver.aget_tuple(source)
    phase = (latest.metadata or {}).get("phase", "A+") if latest else "A+"
    async with GraphRunner(settings, phase=phase) as runner:
        graph = runner.graph
        if from_node not in graph.nodes or from_node.startswith("__"):
            nodes = [n for n in graph.nodes if not n.startswith("__")]
            raise ReplayProblem(f"unknown node {from_node!r}; one of {', '.join(nodes)}")
        history = [s async for s in graph.aget_state_history(source)]
        history.reverse()  # oldest first
        at = next((i for i, s in enumerate(history) if from_node in s.next), None)
        if at is None:
            raise ReplayProblem(f"thread {thread_id!r} never reached {from_node!r}")
        before = history[at - 1] if at > 0 else None
        as_node = before.next[0] if before is not None and before.next else None
        values = dict(history[at].values) | (edits or {})
        new_id = f"{thread_id}-replay-{uuid.uuid4().hex[:6]}"
        config = thread_config(
            new_id,
            str(values.get("question", "")),
            phase=phase,
            replay_of=thread_id,
            replay_from=from_node,
            replay_edits=sorted(edits or {}),
        )
        if as_node is None or as_node == "__start__":
            # Replaying from the first node is a fresh run of the same input.
            inputs = {
                k: values[k] for k in ("question", "qtype", "given", "history") if k in values
            }
            final = await graph.ainvoke(inputs, config, context=context)
        else:
            await graph.aupdate_state(config, values, as_node=as_node)
            final = await graph.ainvoke(None, config, context=context)
    result = dict(final.get("result") or {})
    result["thread_id"] = new_id
    return new_id, result


Decide = Callable[[str, dict[str, Any]], Awaitable[tuple[str, Any]]]
"""Given the next node and the state, return ("continue"|"skip"|"quit", None) or ("edit",
{field: value})."""


async def step_through(
    settings: Settings,
    context: Context,
    question: str,
    decide: Decide,
    *,
    qtype: str | None = None,
) -> tuple[str, dict[str, Any] | None, list[str]]:
    """Run a question one node at a time, asking `decide` before each.

    Returns:
        The thread id, the result (None when quit before the end) and the nodes run.
    """
    question = check_question(question)
    thread_id = f"step-{uuid.uuid4().hex[:12]}"
    config = thread_config(thread_id, question, phase="A+")
    ran: list[str] = []
    async with GraphRunner(settings) as runner:
        graph = runner.graph
        pending: dict[str, Any] | None = {"question": question, "qtype": qtype}
        await graph.ainvoke(pending, config, context=context, interrupt_before="*")
        while True:
            snapshot = await graph.aget_state(config)
            if not snapshot.next:
                break
            node = snapshot.next[0]
            action, value = await decide(node, dict(snapshot.values))
            if action == "quit":
                return thread_id, None, ran
            if action == "edit":
                unknown = set(value) - EDITABLE
                if unknown:
                    raise ReplayProblem(f"not state fields: {', '.join(sorted(unknown))}")
                await graph.aupdate_state(config, value)
                continue
            ran.append(node)
            if action == "skip":
                await graph.ainvoke(None, config, context=context)
                break
            await graph.ainvoke(None, config, context=context, interrupt_before="*")
        final = await graph.aget_state(config)
    return thread_id, final.values.get("result"), ran
