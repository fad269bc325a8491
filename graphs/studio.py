"""The QA graph for LangGraph's own server (`langgraph dev`, LangGraph Studio).

That server starts runs without quorum's runtime Context, so this graph builds one from the
settings (QUORUM_* variables, QUORUM_CONFIG) on first use and shares it between runs; the
server brings its own checkpointer.
"""

from __future__ import annotations

import threading

from graphs.qa import build_graph
from graphs.runtime import build_context
from infra.settings import load_settings
from nodes.context import Context

_lock = threading.Lock()
_context: Context | None = None


def default_context() -> Context:
    """Return the process's Context, built once from the settings."""
    global _context
    with _lock:
        if _context is None:
            context = build_context(load_settings())
            context.models.warm()  # here, in the worker thread, not in a node on the loop
            _context = context
        return _context


graph = build_graph(default_context=default_context)
