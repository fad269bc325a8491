"""BioASQ Task B: question types, answer shapes and normalisation."""

from infra.bioasq.answers import exact_answer_shape, format_exact, normalize_answer, pubmed_url
from infra.bioasq.types import QUESTION_TYPES, detect_type

__all__ = [
    "QUESTION_TYPES",
    "detect_type",
    "exact_answer_shape",
    "format_exact",
    "normalize_answer",
    "pubmed_url",
]
