"""Checks of what users hand quorum, cheap enough to run before any model or index loads."""

from __future__ import annotations

from pathlib import Path

from infra.bioasq.formats import FormatError, Question, load_questions
from infra.errors import UserError

MAX_QUESTION_CHARS = 4000


class InputProblem(UserError):
    """Input the graph must not be run on."""


def check_question(question: str) -> str:
    """Return the question stripped, or raise InputProblem saying what is wrong with it."""
    text = (question or "").strip()
    if not text:
        raise InputProblem("the question is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise InputProblem(
            f"the question is {len(text):,} characters long; the limit is {MAX_QUESTION_CHARS:,}"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputProblem(
            "the question is not valid UTF-8 (check the terminal's encoding)"
        ) from None
    if not any(ch.isalnum() for ch in text):
        raise InputProblem("the question has no words")
    return text


def load_testset(path: Path, *, phase: str, limit: int | None = None) -> list[Question]:
    """Read a BioASQ test set and check every question before anything runs or is written."""
    questions = load_questions(path)[:limit]
    for number, question in enumerate(questions):
        try:
            check_question(question.body)
        except InputProblem as exc:
            raise FormatError(f"{path}: questions[{number}] ({question.id}): {exc}") from None
    if phase == "B" and not any(q.snippets for q in questions):
        raise FormatError(f"{path}: phase B needs the given snippets; this file has none")
    return questions
