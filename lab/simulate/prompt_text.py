"""What the simulated reader finds in a prompt: numbered passages, the question, a decision.

Quorum renders passages as "[i] PMID <id>", a title line and the text, joined by blank lines
(nodes/passages.py `passages`), asks "Question: <question>", and CORG's relation prompt shows
"Passage 1:" and "Passage 2:" sections. These parsers read those shapes and nothing else.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

HEADER = re.compile(r"^\[(\d+)\] PMID (\S+)[ \t]*\n", re.MULTILINE)
DELIMITERS = frozenset({"<evidence>", "</evidence>"})
"""The lines nodes/passages.py frames the passages with (the lab stands on infra alone): never
part of a passage. Left in, the last passage's text ended in "</evidence>", which the reader
then quoted and wrote into its answers ("no. </evidence>")."""
# Where the last passage's text stops: the sections prompts put after the passages.
AFTER_PASSAGES = re.compile(
    r"\n\n(?=(?:Question|Answer|Readers' answers|Ensemble decision|Decided answer|Decision|"
    r"List the duplicates)\b)"
)
QUESTION_LINE = re.compile(r"^[ \t]*Question:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
CONTINUATION = re.compile(r"(?:^|\n)[ \t]*(Question|Answer)[ \t]*:[ \t]*", re.IGNORECASE)
PAIR_SECTION = re.compile(r"^[ \t]*(?:Passage|Context|Document)[ \t]+([12])[ \t]*:[ \t]*\n", re.M)
DECISION_LINE = re.compile(
    r"^[ \t]*(?:Ensemble decision|Decided answer|Decision)[ \t]*:[ \t]*(.+?)[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)
VOTES_LINE = re.compile(r"Readers' answers \(votes\):[ \t]*(\[.*?\])[ \t]*$", re.MULTILINE)
SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


@dataclass(frozen=True)
class Block:
    """One numbered passage as the prompt shows it."""

    number: int
    pmid: str
    body: str
    """Everything shown under the header line: title line and text, verbatim."""
    start: int
    end: int
    """Offsets of the block (header included) in the text it was parsed from."""


def numbered_passages(text: str) -> list[Block]:
    """Return the numbered passages of a prompt, in the order shown."""
    headers = list(HEADER.finditer(text))
    blocks = []
    for k, header in enumerate(headers):
        if k + 1 < len(headers):
            end = headers[k + 1].start()
        else:
            stop = AFTER_PASSAGES.search(text, header.end())
            end = stop.start() if stop else len(text)
        body = _unframed(text[header.end() : end]).rstrip("\n")
        blocks.append(Block(int(header[1]), header[2], body, header.start(), end))
    return blocks


def question_of(text: str) -> str | None:
    """Return the question a prompt asks (its last "Question:" line)."""
    found = QUESTION_LINE.findall(text)
    return found[-1] if found else None


def pair_passages(text: str) -> tuple[str, str] | None:
    """Return the texts of the "Passage 1:" and "Passage 2:" sections, if both are there."""
    sections = {m[1]: m for m in PAIR_SECTION.finditer(text)}
    if set(sections) != {"1", "2"} or sections["1"].start() > sections["2"].start():
        return None
    first = _unframed(text[sections["1"].end() : sections["2"].start()]).strip()
    stop = AFTER_PASSAGES.search(text, sections["2"].end())
    second = _unframed(text[sections["2"].end() : stop.start() if stop else len(text)]).strip()
    return first, second


def _unframed(text: str) -> str:
    """Return a passage's text without the evidence delimiters' lines around it."""
    return "\n".join(line for line in text.split("\n") if line.strip() not in DELIMITERS)


def decision_of(text: str) -> list[str] | None:
    """Return the answer an ensemble decided, as a synthesis prompt states it.

    A line "Ensemble decision: …" (or "Decided answer:", "Decision:") wins. Its value is
    plain text, or JSON: a string, a list of strings (a list question's items), or ranked
    rows [[answer, support], …] whose first row is the decision. Otherwise the most-voted
    row of "Readers' answers (votes): [[answer, votes], …]" (the first of equal votes).
    """
    if found := DECISION_LINE.findall(text):
        return _answer_items(found[-1])
    if votes := VOTES_LINE.findall(text):
        try:
            rows = json.loads(votes[-1])
        except json.JSONDecodeError:
            return None
        counted = [r for r in rows if isinstance(r, list) and len(r) >= 2 and r[0]]
        if counted:
            best = max(counted, key=lambda r: _number(r[1]))
            return _answer_items(json.dumps(best[0]))
    return None


def continuation_start(text: str, after: int) -> tuple[int, str] | None:
    """Return where a scored continuation starts after offset `after`, and its kind.

    The continuation follows the last "Question:" or "Answer:" marker past the passages;
    the kind is "question" or "answer".
    """
    markers = list(CONTINUATION.finditer(text, after))
    if not markers:
        return None
    last = markers[-1]
    return last.end(), last[1].lower()


def quote(body: str, answers: list[str], limit: int = 200) -> str:
    """Return a verbatim span of the body: the sentence naming an answer, else the first.

    The span is an exact substring of `body`, at most `limit` characters, cut around the
    answer when its sentence is longer.
    """
    limit = max(1, limit)
    for answer in sorted((a for a in answers if a.strip()), key=len, reverse=True):
        hit = re.search(re.escape(answer.strip()), body, re.IGNORECASE)
        if hit:
            start, end = _sentence(body, hit.start(), hit.end())
            if end - start > limit:
                room = max(0, limit - (hit.end() - hit.start()))
                start = max(start, hit.start() - room // 2)
                end = min(end, start + limit)
            return _trimmed(body, start, end)
    lines = body.split("\n", 1)
    offset = len(lines[0]) + 1 if len(lines) == 2 and lines[1].strip() else 0
    start, end = _sentence(body, offset, offset)
    return _trimmed(body, start, min(end, start + limit))


def _sentence(body: str, start: int, end: int) -> tuple[int, int]:
    before = [m.end() for m in SENTENCE_END.finditer(body, 0, start)]
    first = before[-1] if before else 0
    after = SENTENCE_END.search(body, max(end, first))
    last = after.end() if after and after[0] != "\n" else (after.start() if after else len(body))
    return first, max(last, end)


def _trimmed(body: str, start: int, end: int) -> str:
    span = body[start:end]
    return span.strip() or body.strip()[: end - start]


def _answer_items(value: str) -> list[str] | None:
    try:
        parsed: Any = json.loads(value)
    except json.JSONDecodeError:
        parsed = value.strip()
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], list):
        parsed = parsed[0][0] if parsed[0] else None  # ranked rows: the first row's answer
    items = parsed if isinstance(parsed, list) else [parsed]
    found = [str(i).strip() for i in items if i is not None and str(i).strip()]
    return found or None


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
