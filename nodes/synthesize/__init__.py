"""synthesize: the strategy's decision made into an answer that keeps the answer contract."""

from nodes.synthesize.node import decision_lines, synthesize

__all__ = ["decision_lines", "synthesize"]
