"""permute_vote: K orders of the top-m, answered greedily, then a majority vote."""

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
from nodes.ensemble.views import permuted_views
from nodes.state import Passage


@register("permute_vote")
class PermuteVote(Strategy):
    """K permutations of the same passages: the spread comes from position bias.

    CoBag's Permute-Vote and CCV's "MoA majority vote" baseline: greedy answers, one per
    member, the most frequent normalized answer wins.
    """

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return the rank order and K-1 distinct shuffles of the top-m, answered greedily."""
        settings = ctx.settings.ensemble
        orders = permuted_views(len(contexts), settings.members, settings.contexts, seed)
        recorded = StrategySettings.of(
            ctx, models, members=settings.members, contexts=settings.contexts, temperature=0.0
        )
        return Plan(every_model(models, orders, 0.0), contexts, recorded)
