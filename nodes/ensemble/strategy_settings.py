"""What a strategy ran with: a typed, frozen record that its decision carries into the trace.

A strategy's plan holds one (`Plan.settings`); what changes after planning (the PMIDs the
members saw) is set with `dataclasses.replace`, never by mutation. The decision records it as
plain JSON (`record`), so the state, its checkpoints and a trace read from an older run stay
what they were. A strategy with settings of its own (CoBag, CCV, MoI) subclasses it in its
module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Self

from infra.models import ChatModel
from nodes.context import Context


@dataclass(frozen=True, kw_only=True)
class StrategySettings:
    """Every setting a strategy ran with, common to all of them."""

    models: tuple[str, ...]
    """The ensemble models, by name."""
    seed: int
    """ensemble.seed: views are drawn from question_seed(seed, question), which the trace
    reproduces (the derived 64-bit seed itself would lose digits in a browser)."""
    list_quorum: float
    """ensemble.list_quorum: the share of members a list item needs."""
    synonym_cosine: float
    """ensemble.synonym_cosine: factoid and list candidates this close are one."""
    members: int
    """K: the views (member calls) per model."""
    contexts: int
    """m: the passages a view shows."""
    temperature: float
    """The members' sampling temperature."""
    shown: tuple[str, ...] | None = None
    """The PMIDs some member saw, in rank order; set once the views are final."""

    @classmethod
    def of(cls, ctx: Context, models: Sequence[ChatModel], **chosen: Any) -> Self:
        """Return the settings a strategy chose, beside the ensemble's own from `ctx`."""
        ensemble = ctx.settings.ensemble
        return cls(
            models=tuple(m.name for m in models),
            seed=ensemble.seed,
            list_quorum=ensemble.list_quorum,
            synonym_cosine=ensemble.synonym_cosine,
            **chosen,
        )

    def record(self) -> dict[str, Any]:
        """Return the settings as the decision records them: JSON values, unset ones left out."""
        recorded = {f.name: _json(getattr(self, f.name)) for f in fields(self) if f.name != "shown"}
        if self.shown is not None:
            recorded["shown"] = list(self.shown)  # last: read beside the evidence order
        return {k: v for k, v in recorded.items() if v is not None}


def _json(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value
