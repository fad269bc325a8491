"""Organize strategies, registered under their settings name.

Every module here is imported below, so a new strategy is its module (a class decorated
`@register("<name>")`) plus its name in the `organize.strategy` settings Literal (where "auto",
which chooses one of them, stands beside the registered names).
"""

import importlib
import pkgutil

from nodes.organize.strategies.registry import (
    AUTO,
    STRATEGIES,
    OrganizeStrategy,
    chosen_strategy,
    strategy_named,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["AUTO", "STRATEGIES", "OrganizeStrategy", "chosen_strategy", "strategy_named"]
