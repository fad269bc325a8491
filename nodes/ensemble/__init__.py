"""ensemble: several models x K permuted context views, answered concurrently, then voted."""

from nodes.ensemble.node import ensemble

__all__ = ["ensemble"]
