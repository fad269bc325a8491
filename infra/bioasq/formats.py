"""BioASQ Task B files (test sets, golden sets, submissions) read into plain questions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.bioasq.types import QUESTION_TYPES
from infra.bioasq.urls import pmid_of
from infra.errors import UserError


class FormatError(UserError):
    """A BioASQ file that cannot be used, naming the file and the place."""


@dataclass
class Question:
    """One BioASQ question with whatever gold the file carries."""

    id: str
    body: str
    type: str
    documents: list[str] = field(default_factory=list)
    snippets: list[dict[str, Any]] = field(default_factory=list)
    exact_answer: Any = None
    ideal_answer: Any = None


def load_questions(path: Path) -> list[Question]:
    """Read a BioASQ JSON file's questions; unknown fields are ignored."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise FormatError(f"{path}: expected an object with a 'questions' list")
    out = []
    first_at: dict[str, int] = {}
    for i, item in enumerate(data["questions"]):
        where = f"{path}: questions[{i}]"
        if not isinstance(item, dict):
            raise FormatError(f"{where}: not an object")
        qid, body, qtype = item.get("id"), item.get("body"), item.get("type")
        if qid is None:
            raise FormatError(f"{where}: missing 'id'")
        if not isinstance(qid, str) or not qid:
            kind = type(qid).__name__ if qid != "" else "an empty string"
            raise FormatError(f"{where}: 'id' must be a non-empty string, got {kind} {qid!r}")
        if qid in first_at:
            raise FormatError(
                f"{where}: duplicate id {qid!r} (first at questions[{first_at[qid]}])"
            )
        first_at[qid] = i
        if not isinstance(body, str) or not body.strip():
            raise FormatError(f"{where} ({qid}): missing 'body'")
        if qtype not in QUESTION_TYPES:
            raise FormatError(f"{where} ({qid}): unknown type {qtype!r}")
        for key in ("documents", "snippets"):
            if not isinstance(item.get(key) or [], list):
                raise FormatError(f"{where} ({qid}): '{key}' must be a list")
        for j, snippet in enumerate(item.get("snippets") or []):
            if not isinstance(snippet, dict):
                raise FormatError(f"{where} ({qid}): snippets: every snippet must be an object")
            for key in ("document", "text"):
                if not isinstance(snippet.get(key, ""), str):
                    raise FormatError(f"{where} ({qid}): snippets[{j}]: '{key}' must be a string")
        try:
            documents = [pmid_of(d) for d in item.get("documents") or []]
        except ValueError as exc:
            raise FormatError(f"{where} ({qid}): documents: {exc}") from None
        out.append(
            Question(
                id=qid,
                body=body.strip(),
                type=qtype,
                documents=documents,
                snippets=list(item.get("snippets") or []),
                exact_answer=item.get("exact_answer"),
                ideal_answer=item.get("ideal_answer"),
            )
        )
    return out
