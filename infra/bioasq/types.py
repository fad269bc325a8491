"""BioASQ's question types and phases, and type detection for when the user does not say."""

from __future__ import annotations

import re
from enum import StrEnum


class QuestionType(StrEnum):
    """A BioASQ question type, defined here once.

    A str: JSON, files, the state and comparisons with plain strings read it as its value.
    """

    YESNO = "yesno"
    FACTOID = "factoid"
    LIST = "list"
    SUMMARY = "summary"


QUESTION_TYPES: tuple[QuestionType, ...] = tuple(QuestionType)
"""Every question type, in BioASQ's order (yesno, factoid, list, summary)."""
PHASES = ("A", "A+", "B")
"""BioASQ Task B phases: A retrieves, A+ retrieves and answers, B answers from given snippets."""
RETRIEVING_PHASES = ("A", "A+")
"""The phases that search for documents and snippets themselves."""
ANSWERING_PHASES = ("A+", "B")
"""The phases that answer the question (exact and ideal answers)."""


def check_phase(phase: str, *, name: str = "phase") -> str:
    """Return a phase as PHASES spells it ("a+" reads as "A+").

    Raises:
        ValueError: "unknown phase 'C'; choose one of A, A+, B" (`name` in place of "phase").
    """
    if phase.upper() not in PHASES:
        raise ValueError(f"unknown {name} {phase!r}; choose one of {', '.join(PHASES)}")
    return phase.upper()


_YESNO = re.compile(
    r"^(is|are|was|were|do|does|did|can|could|should|has|have|had|will|would|may|might|must)\b",
    re.I,
)
_LIST = re.compile(
    r"^(list|enumerate|name (the|all|some)|which (are|were)|"
    r"what are the (names|types|main|major|different|"
    r"\w+ (genes|proteins|drugs|diseases|types|symptoms|mutations))|which \w+ (are|have|were))\b",
    re.I,
)
# "What are the genes …", "What are the main side effects …": a plural noun asks for a list.
_PLURAL = re.compile(r"^(what|which) (are|were) (the )?(\w+[ -]){0,2}\w+s\b", re.I)
_SUMMARY = re.compile(
    r"^(describe|explain|summari[sz]e|how|why|what is the (role|function|mechanism|effect|impact|"
    r"association|relationship|difference|significance)|what are the (roles|functions|mechanisms|"
    r"effects)|what is known|what do we know|discuss)\b",
    re.I,
)


def detect_type(question: str) -> str:
    """Guess the BioASQ type of a question from its form (yesno, list, summary, else factoid).

    The type's value, a plain str: the state holds it so, and checkpoints store it as one.
    """
    text = question.strip().lstrip("¿\"'( ")
    if _YESNO.match(text):
        return QuestionType.YESNO.value
    if _SUMMARY.match(text):
        return QuestionType.SUMMARY.value
    if _LIST.match(text) or _PLURAL.match(text):
        return QuestionType.LIST.value
    return QuestionType.FACTOID.value
