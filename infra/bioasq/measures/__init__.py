"""BioASQ Task B measures, computed as the organizers' evaluator (EvaluatorTask1b) computes them.

A port of BioASQ/Evaluation-Measures, flat/BioASQEvaluation/src (commit 8c8e689): the Java's quirks
are kept on purpose so that scores equal the official ones; each is marked with SEE: and the class
and method it mirrors. Concepts and triples (gone since BioASQ 8) are left out. Ideal answers are
not scored by that evaluator: the ``*_approx`` ROUGE keys are this package's own approximation.
Parsing and the shared arithmetic are in `parsed`, the two phases in `phase_a` and `phase_b`.
"""

from infra.bioasq.measures.parsed import EPSILON, challenge_version
from infra.bioasq.measures.phase_a import evaluate_phase_a
from infra.bioasq.measures.phase_b import evaluate_phase_b

__all__ = ["EPSILON", "challenge_version", "evaluate_phase_a", "evaluate_phase_b"]
