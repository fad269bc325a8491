"""self_consistency: the same top-m view K times, sampled, then a majority vote."""

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


@register("self_consistency")
class SelfConsistency(Strategy):
    """K samples of one view: the spread comes from the temperature, not from the order.

    CoBag's baseline (context-bagging.txt §4.1: K = 5 samples at T = 1.0 of a fixed context).
    """

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return the top-m view K times at the sampling temperature."""
        settings = ctx.settings.ensemble
        top = list(range(min(len(contexts), settings.contexts)))
        recorded = StrategySettings.of(
            ctx,
            models,
            members=settings.members,
            contexts=settings.contexts,
            temperature=settings.sample_temperature,
        )
        views = every_model(models, [top] * settings.members, settings.sample_temperature)
        return Plan(views, contexts, recorded)
