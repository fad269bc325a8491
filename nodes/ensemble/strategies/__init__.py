"""Answer-ensemble strategies, one module each, registered under their settings name.

Every module here is imported below, so a new strategy is its module (a class decorated
`@register("<name>")`) plus its name in the `ensemble.strategy` settings Literal. The
arithmetic (Context Bagging's views, citation voting, MoI's orders in `moi_orders` and its
fit in `moi_fit`) is pure and tested alone. Each strategy returns a `Decision` (its answers,
their support, its evidence order and every setting it ran with), which is what synthesis
reads.
"""

import importlib
import pkgutil

from nodes.ensemble.strategies.ccv import CitedAnswer, ccv_select
from nodes.ensemble.strategies.cobag import cobag_views, mean_relevance
from nodes.ensemble.strategies.moi_fit import MoIFit, moi_flat, moi_solve, orient
from nodes.ensemble.strategies.moi_orders import moi_permutations, variable_lengths
from nodes.ensemble.strategies.registry import (
    STRATEGIES,
    Plan,
    Strategy,
    StrategySettings,
    StrategyUnavailable,
    View,
    strategy_named,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "STRATEGIES",
    "CitedAnswer",
    "MoIFit",
    "Plan",
    "Strategy",
    "StrategySettings",
    "StrategyUnavailable",
    "View",
    "ccv_select",
    "cobag_views",
    "mean_relevance",
    "moi_flat",
    "moi_permutations",
    "moi_solve",
    "orient",
    "strategy_named",
    "variable_lengths",
]
