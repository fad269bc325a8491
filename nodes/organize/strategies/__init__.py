"""Organize strategies, registered under their settings name.

Every module here is imported below, so a new strategy is its module (a class decorated
`@register("<name>")`) plus its name in the `organize.strategy` settings Literal.
"""

import importlib
import pkgutil

from nodes.organize.strategies.registry import STRATEGIES, OrganizeStrategy, strategy_named

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["STRATEGIES", "OrganizeStrategy", "strategy_named"]
