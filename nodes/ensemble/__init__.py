"""ensemble: several models x K permuted context views, answered concurrently, then voted."""

from nodes.ensemble.node import StrategyUnavailable, ensemble

__all__ = ["StrategyUnavailable", "ensemble"]
