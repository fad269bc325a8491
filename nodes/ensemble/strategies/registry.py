"""Ensemble strategies by their settings name: what each asks the members, and how it counts.

A strategy is a module in this package with one class decorated `@register("<name>")`, the
name it has in `ensemble.strategy`; the package imports every module, so that decorator is
the strategy's whole registration (and the name in the settings Literal, which a test checks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from infra.models import ChatModel
from infra.settings import SettingsError
from nodes.context import Context
from nodes.ensemble.vote import candidate_keys, synonym_clusters, vote


class StrategyUnavailable(RuntimeError):
    """The configured strategy cannot run with these models (it is refused, never faked)."""


@dataclass(frozen=True)
class View:
    """What one member call sees: a model, an order of contexts, a temperature."""

    model: ChatModel
    number: int
    order: list[int]
    temperature: float


@dataclass
class Plan:
    """The member calls a strategy asks for, and what it learned while choosing them."""

    views: list[View]
    contexts: list[dict[str, Any]]
    """The contexts the views' orders index into."""
    weights: list[float] | None = None
    """A vote weight per view number; None: one member, one vote."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Model calls made while planning (MoI's likelihoods), recorded before the members'."""
    diagnostics: dict[str, Any] = field(default_factory=dict)
    """Recorded under `votes` beside the strategy's name."""


class Strategy:
    """One way to choose the members' views of the contexts and to count their answers."""

    name: ClassVar[str]
    cited: ClassVar[bool] = False
    """Members cite the one passage that best supports the answer, and quote it (CCV)."""

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[dict[str, Any]],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return the views every ensemble model answers for this question."""
        raise NotImplementedError

    async def tally(
        self, ctx: Context, qtype: str, members: list[dict[str, Any]], plan: Plan
    ) -> dict[str, Any]:
        """Return the vote table: a (weighted) majority, synonyms merged for factoid and list."""
        weights = [plan.weights[m["view"]] for m in members] if plan.weights else None
        answers = [m["answer"] if m["error"] is None else [] for m in members]
        settings = ctx.settings.ensemble
        clusters = None
        if qtype in ("factoid", "list"):
            keys = candidate_keys(answers)
            if len(keys) > 1:
                vectors = await asyncio.to_thread(ctx.embedder.embed_documents, keys)
                clusters = synonym_clusters(keys, vectors, threshold=settings.synonym_cosine)
        return vote(
            qtype, answers, list_quorum=settings.list_quorum, weights=weights, clusters=clusters
        )


STRATEGIES: dict[str, Strategy] = {}
"""Every ensemble strategy by its `ensemble.strategy` name."""


def register(name: str) -> Callable[[type[Strategy]], type[Strategy]]:
    """Register a Strategy class under its settings name."""

    def add(cls: type[Strategy]) -> type[Strategy]:
        if name in STRATEGIES:
            raise ValueError(f"ensemble strategy {name!r} is registered twice")
        cls.name = name
        STRATEGIES[name] = cls()
        return cls

    return add


def strategy_named(name: str) -> Strategy:
    """Return the registered strategy; an unknown name is a one-line settings error."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise SettingsError(
            f"invalid setting ensemble.strategy: unknown strategy {name!r}; "
            f"choose one of {', '.join(STRATEGIES)}"
        ) from None


def every_model(models: list[ChatModel], orders: list[list[int]], temperature: float) -> list[View]:
    """Return one view per (model, order): every model answers every order."""
    return [
        View(model, number, order, temperature)
        for model in models
        for number, order in enumerate(orders)
    ]
