"""single: the top-m contexts in rank order, one greedy call per model."""

from __future__ import annotations

from infra.models import ChatModel
from nodes.context import Context
from nodes.ensemble.strategies.registry import (
    Plan,
    Strategy,
    StrategySettings,
    every_model,
    register,
)
from nodes.state import Passage


@register("single")
class Single(Strategy):
    """One view, the retriever's order: CoBag's Filtered-Single, the baseline of every ensemble."""

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return the top-m in rank order, answered greedily."""
        m = ctx.settings.ensemble.contexts
        top = list(range(min(len(contexts), m)))
        settings = StrategySettings.of(ctx, models, members=1, contexts=m, temperature=0.0)
        return Plan(every_model(models, [top], 0.0), contexts, settings)
