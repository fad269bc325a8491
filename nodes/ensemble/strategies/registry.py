"""Ensemble strategies by their settings name: what each asks the members, and how it decides.

A strategy is a module in this package with one class decorated `@register("<name>")`, the
name it has in `ensemble.strategy`; the package imports every module, so that decorator is
the strategy's whole registration (and the name in the settings Literal, which a test checks).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from infra.models import ChatModel
from infra.settings import Settings, SettingsError
from nodes.context import Context
from nodes.ensemble.decide import majority_decision
from nodes.ensemble.strategy_settings import StrategySettings
from nodes.ensemble.vote import candidate_keys, synonym_clusters, vote
from nodes.state import Call, Decision, Member, Passage, Votes


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
    contexts: list[Passage]
    """The contexts the views' orders index into."""
    settings: StrategySettings
    """Every setting the strategy ran with (its K as `members`, its m as `contexts`); the
    decision records them into state and trace, with `shown`: the PMIDs some member saw."""
    weights: list[float] | None = None
    """A vote weight per view number; None: one member, one vote."""
    order: list[int] | None = None
    """The evidence order the strategy chose (indices into contexts); None: the passages the
    views showed, in rank order."""
    calls: list[Call] = field(default_factory=list)
    """Model calls made while planning (MoI's likelihoods), recorded before the members'."""
    diagnostics: Votes = field(default_factory=Votes)
    """Recorded under `votes` beside the strategy's name (CoBag's relevance, CCV's word, MoI's
    fits)."""
    notes: list[str] = field(default_factory=list)
    """Things a reader of the trace should know (CoBag's pool no larger than m)."""
    clusters: dict[str, str] = field(default_factory=dict)
    """Normalized answer → the key it was counted under (synonyms merged), set by `tally`."""

    def shown(self) -> set[int]:
        """Return the contexts (indices) some view shows a member."""
        return {i for view in self.views for i in view.order}

    def shown_order(self) -> list[int]:
        """Return the evidence order: the chosen one, else every passage shown, in rank order."""
        if self.order is not None:
            return list(self.order)
        return sorted(self.shown())


class Strategy(ABC):
    """One way to choose the members' views of the contexts and to decide from their answers."""

    name: ClassVar[str]

    def cites(self, qtype: str) -> bool:
        """Tell whether members cite the one passage that best supports the answer (CCV)."""
        return False

    def refusal(self, settings: Settings) -> str | None:
        """Return why the configured models cannot run this strategy, or None when they can.

        Checked before any work (graphs/runtime.check_models).
        """
        return None

    @abstractmethod
    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return the views every ensemble model answers for this question.

        `contexts` is every candidate passage, best reranked first; a strategy shows its
        top m (ensemble.contexts) unless it draws from more (CoBag's pool).
        """
        ...

    async def tally(self, ctx: Context, qtype: str, members: list[Member], plan: Plan) -> Votes:
        """Return the vote table: a (weighted) majority, synonyms merged for factoid and list."""
        weights = [plan.weights[m["view"]] for m in members] if plan.weights else None
        answers = [m["answer"] if m["error"] is None else [] for m in members]
        settings = plan.settings  # what the decision records is what acts
        clusters = None
        if qtype in ("factoid", "list"):
            keys = candidate_keys(answers)
            if len(keys) > 1:
                vectors = await asyncio.to_thread(ctx.embedder.embed_documents, keys)
                clusters = synonym_clusters(keys, vectors, threshold=settings.synonym_cosine)
        plan.clusters = clusters or {}
        return vote(
            qtype, answers, list_quorum=settings.list_quorum, weights=weights, clusters=clusters
        )

    def decide(self, qtype: str, members: list[Member], plan: Plan, votes: Votes) -> Decision:
        """Return the decision: the majority's ranked answers, in the plan's evidence order."""
        return majority_decision(self.name, qtype, members, plan, votes, how="majority vote")


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
