"""synthesize: the strategy's decision made into an answer that keeps the answer contract."""

from nodes.synthesize.node import decision_lines, evidence_round, synthesize

__all__ = ["decision_lines", "evidence_round", "synthesize"]
