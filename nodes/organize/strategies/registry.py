"""Organize strategies by their settings name: each turns the top contexts into the update.

A strategy is a class in a module of this package decorated `@register("<name>")`, the name
it has in `organize.strategy`; the package imports every module, so that decorator is the
strategy's whole registration (and the name in the settings Literal, which a test checks).
`organize.strategy` "auto" names no strategy: `chosen_strategy` picks one by the organize model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from infra.models import ChatModel
from infra.settings import Settings, SettingsError
from nodes.context import Context
from nodes.state import Organized, Passage


class OrganizeStrategy(ABC):
    """One way to relate, group or prune the top contexts before answering."""

    name: ClassVar[str]
    forms_groups: ClassVar[bool] = False
    """Whether it forms groups of contexts, each answered apart (by itself, or for corg by the
    ensemble: organize.corg_answers); their aggregate is then the decision."""

    @abstractmethod
    async def organize(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        model: ChatModel,
        qtype: str,
    ) -> Organized:
        """Return the node's update: `organized` and `relations`, and whatever else it found.

        `contexts` is the top `organize.top_k` reranked passages, best first.
        """
        ...

    def settings(self, ctx: Context, model: ChatModel) -> dict[str, Any]:
        """Return every setting this strategy runs with, as its decision records them."""
        return {"strategy": self.name, "top_k": ctx.settings.organize.top_k, "model": model.name}


STRATEGIES: dict[str, OrganizeStrategy] = {}
"""Every organize strategy by its `organize.strategy` name."""


def register(name: str) -> Callable[[type[OrganizeStrategy]], type[OrganizeStrategy]]:
    """Register an OrganizeStrategy class under its settings name."""

    def add(cls: type[OrganizeStrategy]) -> type[OrganizeStrategy]:
        if name in STRATEGIES:
            raise ValueError(f"organize strategy {name!r} is registered twice")
        cls.name = name
        STRATEGIES[name] = cls()
        return cls

    return add


def strategy_named(name: str) -> OrganizeStrategy:
    """Return the registered strategy; an unknown name is a one-line settings error."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise SettingsError(
            f"invalid setting organize.strategy: unknown strategy {name!r}; "
            f"choose one of {', '.join(STRATEGIES)}"
        ) from None


AUTO = "auto"
"""The `organize.strategy` that chooses by the organize model (`chosen_strategy`)."""


def chosen_strategy(settings: Settings) -> tuple[OrganizeStrategy, str]:
    """Return the strategy organize runs and why: organize.strategy, "auto" by the model.

    "auto" mirrors verify.enabled's: CORG (the design's organizer) for an OpenAI-compatible
    endpoint, whose pair calls run concurrently; dedupe for a local model, which runs one call
    at a time (CORG took 31 calls and 230 s for 10 passages on the 135M demo model).
    """
    name = settings.organize.strategy
    if name != AUTO:
        return strategy_named(name), f"organize.strategy {name!r}"
    spec = settings.models.for_role("organize")[0]
    if spec.provider == "openai":
        why = f"the organize model {spec.model!r} is an OpenAI-compatible endpoint"
        return STRATEGIES["corg"], f"organize.strategy 'auto': {why}"
    why = "the organize model is local, where CORG's pair calls run one at a time"
    return STRATEGIES["dedupe"], f"organize.strategy 'auto': {why}"
