"""Golden files and submissions read as the official evaluator reads them, and its arithmetic.

SEE: marks each Java quirk kept on purpose (see the package's docstring).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infra.bioasq.formats import FormatError
from infra.bioasq.types import QUESTION_TYPES
from infra.bioasq.urls import canonical_url

EPSILON = 0.00001  # SEE: EvaluatorTask1b.epsilon, added to each average precision in GMAP.


def challenge_version(edition: int) -> int:
    """Return the evaluator's ``-e`` version (2, 3, 5, 8 or 9) for a BioASQ edition."""
    # SEE: EvaluatorTask1b.usage: 2 for BioASQ1&2, 3 for 3&4, 5 for 5-7, 8 for 8, 9 from 9 on.
    if edition < 1:
        raise ValueError(f"no BioASQ edition {edition}")
    return next(v for first, v in ((9, 9), (8, 8), (5, 5), (3, 3), (1, 2)) if edition >= first)


# Java double arithmetic: x/0 is ±Infinity or NaN, log of a negative is NaN; Python would raise.
def div(a: float, b: float) -> float:
    """Divide as Java's doubles do."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


def log(x: float) -> float:
    """Take a natural log as Java's Math.log does."""
    if math.isnan(x) or x < 0:
        return math.nan
    return -math.inf if x == 0 else math.log(x)


def exp(x: float) -> float:
    """Exponentiate as Java's Math.exp does (overflow is infinity)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def total(values: Iterable[float]) -> float:
    """Sum left to right like the Java loops (Python 3.12's sum() compensates rounding)."""
    out = 0.0
    for v in values:
        out += v
    return out


def nz(x: float) -> float:
    """Return x, or 0 for NaN (how the averages count an undefined measure)."""
    return 0.0 if math.isnan(x) else x


@dataclass
class Snippet:
    """One snippet: a document, its sections and inclusive character offsets."""

    document: str
    begin_section: str
    end_section: str
    begin: int
    end: int

    @property
    def doc_id(self) -> str:
        """Return the document's id as the evaluator takes it from the URL."""
        # SEE: Snippet.getDocumentOnlyID: the last "/" part (Java's split drops trailing empties).
        parts = self.document.split("/")
        while len(parts) > 1 and not parts[-1]:
            parts.pop()
        return parts[-1]

    @property
    def size(self) -> int:
        """Return the snippet's length in characters, as the evaluator counts it."""
        # SEE: Snippet.getSize: both offsets count as inclusive, so a snippet has end-begin+1 chars.
        return self.end - self.begin + 1

    def overlaps(self, other: Snippet) -> bool:
        """Tell whether the two snippets share characters, as the evaluator decides it."""
        # SEE: Snippet.itOverlaps: same sections, or (one way only) a "sections.0" snippet against
        # an "abstract" one; positions are never compared across other sections.
        comparable = (
            self.begin_section == other.begin_section and self.end_section == other.end_section
        ) or (self.begin_section == "0" and other.begin_section == "abstract")
        return comparable and not (self.begin > other.end or self.end < other.begin)

    def overlap(self, other: Snippet) -> int:
        """Return how many characters the two snippets share."""
        # SEE: Snippet.overlap: its four cases reduce to the inclusive intersection length.
        if not self.overlaps(other):
            return 0
        return min(self.end, other.end) - max(self.begin, other.begin) + 1


@dataclass
class Answer:
    """SEE: data.ExactAnswer: a yes/no label, flat answers (BioASQ 1-2) or synonym lists."""

    label: str | None = None
    answers: list[str] = field(default_factory=list)
    lists: list[list[str]] = field(default_factory=list)

    def matches(self, response: list[str], *, remove: bool) -> bool:
        """Tell whether a submitted answer's synonyms hold one of this gold answer's."""
        # SEE: ExactAnswer.containsAnswerSynonym: plain equality of lower-cased strings (no
        # trimming, no normalisation); with remove (list questions) the gold entry is consumed.
        for i, synonyms in enumerate(self.lists):
            if any(s == r for s in synonyms for r in response):
                if remove:
                    del self.lists[i]
                return True
        return False


@dataclass
class Question:
    """One question of a golden file or a submission, as the evaluator reads it."""

    id: str | None
    type: str | None
    documents: list[str]
    snippets: list[Snippet]
    answer: Answer | None
    ideal: list[str]


def _section(name: Any) -> str:
    # SEE: Task1bData.readSnippets: a section loses everything up to its first "." ("sections.0"
    # becomes "0"; "abstract" and "title" stay).
    name = "" if name is None else str(name)
    return name[name.find(".") + 1 :]


def _parse_answer(value: Any, *, version: int, gold: bool, where: str) -> Answer | None:
    if isinstance(value, str):
        # SEE: Task1bData.readData: lower-cased, "yes" if it contains "yes", else "no" if it
        # contains "no" (so "unknown" reads as "no"), else "none".
        low = value.lower()
        return Answer(label="yes" if "yes" in low else "no" if "no" in low else "none")
    if not isinstance(value, list):
        return None  # NOTE: null is read as no answer (the Java stops on a null exact_answer).
    if not value:
        return Answer()
    if isinstance(value[0], list):
        lists = []
        for item in value:
            if not isinstance(item, list):
                raise FormatError(f"{where}: exact_answer mixes lists and strings")
            names = [str(s).lower() for s in item]
            # SEE: Task1bData.readExactAnswerListOfArraysv2/v3: an empty entry is dropped; since
            # BioASQ 5 a submitted entry keeps only its first name (synonyms count in gold only).
            if names:
                lists.append(names if gold or version < 5 else names[:1])
        return Answer(lists=lists)
    if version == 2:
        return Answer(answers=[str(s).lower() for s in value])
    raise FormatError(f"{where}: exact_answer must be a list of lists (flat lists end in BioASQ 2)")


def parse(data: Any, *, version: int, gold: bool) -> list[Question]:
    """Read questions as Task1bData.readData does; unknown types and fields are kept as nothing."""
    role = "gold" if gold else "submission"
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise FormatError(f"{role}: expected an object with a 'questions' list")
    out = []
    for i, item in enumerate(data["questions"]):
        where = f"{role}: questions[{i}]"
        if not isinstance(item, dict):
            raise FormatError(f"{where}: not an object")
        try:
            snippets = [
                Snippet(
                    canonical_url(str(s.get("document") or "")),
                    _section(s.get("beginSection")),
                    _section(s.get("endSection")),
                    int(s.get("offsetInBeginSection") or 0),
                    int(s.get("offsetInEndSection") or 0),
                )
                for s in item.get("snippets") or []
            ]
        except (AttributeError, TypeError, ValueError) as exc:
            raise FormatError(f"{where}: bad snippet ({exc})") from None
        ideal = item.get("ideal_answer")
        out.append(
            Question(
                id=None if item.get("id") is None else str(item["id"]),
                type=item.get("type") if item.get("type") in QUESTION_TYPES else None,
                # SEE: Task1bData.readDocuments: duplicates dropped; whole strings compared later.
                # NOTE: every PubMed URL form is first written one way (recent golden files mix
                # them); files in one form, as all of editions 7-11, score exactly as before.
                documents=list(
                    dict.fromkeys(canonical_url(str(d)) for d in item.get("documents") or [])
                ),
                snippets=snippets,
                answer=_parse_answer(
                    item.get("exact_answer"), version=version, gold=gold, where=where
                ),
                ideal=[ideal] if isinstance(ideal, str) else [str(t) for t in ideal or []],
            )
        )
    return out


def pairs(gold: Any, submission: Any, version: int) -> list[tuple[Question, Question | None]]:
    """Return each gold question with the submission's question of the same id (or None)."""
    submitted: dict[str, Question] = {}
    for q in parse(submission, version=version, gold=False):
        # SEE: Task1bData.getQuestion(String): the first submitted question with the id is used.
        if q.id is not None:
            submitted.setdefault(q.id, q)
    golds = parse(gold, version=version, gold=True)
    return [(g, submitted.get(g.id) if g.id is not None else None) for g in golds]
