"""organize: relations between the top contexts, and the contexts kept for answering."""

from nodes.organize.node import organize

__all__ = ["organize"]
