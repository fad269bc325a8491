"""organize: the strategy named by `organize.strategy` relates, groups or prunes the contexts."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.context import Context
from nodes.organize.strategies import strategy_named
from nodes.state import QAState


async def organize(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Organize the top contexts with the configured strategy (dedupe by default)."""
    ctx = runtime.context
    strategy = strategy_named(ctx.settings.organize.strategy)
    contexts = list(state.get("contexts", []))[: ctx.settings.organize.top_k]
    if len(contexts) < 2:
        return {"organized": contexts, "relations": []}
    return await strategy.organize(ctx, state["question"], contexts, ctx.models.first("organize"))
