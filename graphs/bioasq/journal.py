"""The journal of a `quorum bioasq run`: one fsynced JSON line per finished question.

A header ties it to its input (SHA-256) and phase, so a re-run with another input or phase is
refused rather than mixed in; a kill mid-write leaves half a line, ended before the next record.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from infra.bioasq.contract import SUBMISSION_MIN_WORDS, answer_problem
from infra.bioasq.types import ANSWERING_PHASES, QUESTION_TYPES
from infra.errors import UserError
from nodes.state import QAState

JOURNAL_VERSION = 1


class JournalMismatch(UserError):
    """The journal beside the output belongs to another input or phase."""


def journal_path(output: Path) -> Path:
    """Return the journal file kept beside a submission."""
    return output.with_name(output.name + ".journal.jsonl")


def fingerprint(input_path: Path, phase: str) -> dict[str, Any]:
    """Return the header that ties a journal to its input file and phase."""
    digest = hashlib.sha256(input_path.read_bytes()).hexdigest()
    return {"journal": JOURNAL_VERSION, "input_sha256": digest, "phase": phase}


def answer_support(values: QAState) -> dict[str, Any] | None:
    """Return what a record keeps of an answer's support check, from a run's final state.

    verdict (supported or refused), verified (supported, self-verified, refused or not
    verified), judge (independent or self, when a verifier was asked), verifier (its model's
    name), relevance (the support record's per-passage relevance, when it holds one) and why.
    None when nothing was to be answered (phase A).
    """
    result = values.get("result") or {}
    summary = result.get("support")
    if summary is None:
        return None
    own = (values.get("answer") or {}).get("support") or {}
    asked = [c.get("model") for c in values.get("calls") or [] if c.get("node") == "verify"]
    return {
        "verdict": summary.get("verdict"),
        "verified": summary.get("verified", "not verified"),
        "judge": summary.get("judge"),
        "verifier": asked[-1] if asked else None,
        "relevance": own.get("relevance"),
        "why": summary.get("why") or "",
    }


class Journal:
    """Append-only JSON lines: a header, then one record per finished (or failed) question.

    A record's status is "ok" (answered), "insufficient" (an honest insufficient-evidence
    answer, with its entry) or "failed" (an error; when no model gave a usable answer, with the
    honest entry too). An unanswered yes/no entry's exact answer is a guess: `"guessed": true`.
    An answering phase's record holds its answer's `support` (`answer_support`).
    """

    def __init__(self, path: Path, header: dict[str, Any]):
        self.path = path
        self.answering = header.get("phase") in ANSWERING_PHASES
        self.done: dict[str, dict[str, Any]] = {}
        self.insufficient: dict[str, dict[str, Any]] = {}
        """Questions whose latest outcome is an insufficient-evidence answer: their records."""
        self.failed: dict[str, str] = {}
        self.guessed: set[str] = set()
        """Questions whose stand-in entry holds a guessed yes/no exact answer."""
        self.stand_ins: dict[str, dict[str, Any]] = {}
        """Unanswered questions' explicit 'insufficient evidence' entries, kept in the file
        until a later run answers them."""
        if path.exists():
            self._read(header)
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the batch
        if path.stat().st_size == 0:
            self._append(header)
        elif not path.read_bytes().endswith(b"\n"):
            # A kill mid-write left half a line: end it, so the next record stands alone.
            self._fh.write("\n")
            self._fh.flush()

    def _read(self, header: dict[str, Any]) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        if not lines:
            return
        try:
            first = json.loads(lines[0])
        except json.JSONDecodeError:
            first = {}
        if {k: first.get(k) for k in header} != header:
            raise JournalMismatch(
                f"{self.path} belongs to another input or phase; choose another --output "
                "or move that journal away"
            )
        for line in lines[1:]:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill: that question runs again
            if isinstance(record, dict) and record.get("id"):
                self._apply(record)

    def _apply(self, record: dict[str, Any]) -> None:
        qid, status = record["id"], record.get("status")
        if (
            status == "ok"
            and self.answering
            and (problem := broken_entry(record.get("entry") or {}))
        ):
            # An older quorum journalled junk as ok ("][{"): run the question again.
            record = {"status": "failed", "id": qid, "error": f"journalled answer: {problem}"}
            status = "failed"
        if status == "ok":
            self.done[qid] = record
            for held in (self.insufficient, self.failed, self.stand_ins):
                held.pop(qid, None)
            self.guessed.discard(qid)
            return
        if qid in self.done:
            return
        if status == "insufficient":
            self.insufficient[qid] = record
            self.failed.pop(qid, None)
        elif status == "failed":
            self.failed[qid] = record.get("error", "")
            self.insufficient.pop(qid, None)  # the latest try failed: a re-run tries again
        if record.get("entry"):  # its entry stands in, with a guessed yes/no or not
            self.stand_ins[qid] = record["entry"]
            (self.guessed.add if record.get("guessed") else self.guessed.discard)(qid)

    def _append(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def record(self, record: dict[str, Any]) -> None:
        """Durably append a question's outcome."""
        self._append(record)
        self._apply(record)

    def close(self) -> None:
        """Close the file."""
        self._fh.close()


def broken_entry(entry: dict[str, Any]) -> str | None:
    """Return how a journalled entry breaks the contract at a submission's one word, or None."""
    qtype = entry.get("type")
    if qtype not in QUESTION_TYPES:
        return None  # nothing to judge the exact answer by
    return answer_problem(
        qtype,
        entry.get("exact_answer"),
        entry.get("ideal_answer"),
        min_words=SUBMISSION_MIN_WORDS,
    )
