"""BioASQ Task B: question types, answer shapes and normalisation."""

from infra.bioasq.answers import exact_answer_shape, format_exact, normalize_answer
from infra.bioasq.types import QUESTION_TYPES, QuestionType, detect_type
from infra.bioasq.urls import pmid_of, pubmed_url

__all__ = [
    "QUESTION_TYPES",
    "QuestionType",
    "detect_type",
    "exact_answer_shape",
    "format_exact",
    "normalize_answer",
    "pmid_of",
    "pubmed_url",
]
