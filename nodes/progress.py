"""Progress a node reports while it runs (LangGraph's custom stream), for live displays."""

from __future__ import annotations

from typing import Any


def report(node: str, **fields: Any) -> None:
    """Send {node, ...fields} to whoever streams the run; a no-op outside a streamed run."""
    try:
        from langgraph.config import get_stream_writer

        get_stream_writer()({"node": node, **fields})
    except (RuntimeError, KeyError):  # called outside a graph run (unit tests, evaluations)
        pass
