"""Check a BioASQ Task B submission before it goes out: every problem, each in one line.

Two levels of strictness. Without `phase` or `testset` the check is of the format every Task B
JSON file shares, and the organisers' own golden files (7B-11B) pass it: they list every
relevant document and snippet (often more than 10) and carry a few slips (one yes/no answer
"Yes", empty synonyms such as ["PITX1", ""], two title snippets at offset -1). Once the round
is known (`phase` or `testset` given) the file is a submission and those are problems too.

Only what BioASQ itself would refuse is an error: the format, ids, types and offsets. The
answers' content is held to the answer contract (infra/bioasq/contract.py) at a submission's one
word, and what breaks it is a warning (`Problem.warning`): an ideal answer that is not prose
("][{", JSON, symbols, a loop), an empty factoid or list answer, a debris item, or an ideal
answer saying no to an exact "yes". BioASQ takes such a file, and the organizers' own golden
files hold a few (participants' looping texts kept among a question's ideal answers: 79-89% of
their 3-grams repeated, in a batch no one here had seen), so `bioasq validate` lists and counts
warnings and fails on them only with --strict. quorum's own answers are refused by the same
rules before they are given (`answer_problem`). An insufficient-evidence statement is an honest
answer: it passes, and so does its empty exact answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.bioasq.contract import (
    SUBMISSION_MIN_WORDS,
    contradiction,
    degenerate_item,
    exact_problem,
    ideal_problem,
    is_insufficient,
)
from infra.bioasq.formats import FormatError
from infra.bioasq.types import ANSWERING_PHASES, QUESTION_TYPES, check_phase
from infra.bioasq.urls import PUBMED_URL, pubmed_url, written_form_problem

MAX_DOCUMENTS = 10
MAX_SNIPPETS = 10
MAX_FACTOID_CANDIDATES = 5
SECTIONS = ("title", "abstract")
SNIPPET_KEYS = (
    "document",
    "text",
    "offsetInBeginSection",
    "offsetInEndSection",
    "beginSection",
    "endSection",
)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a submission, and where."""

    where: str
    message: str
    warning: bool = False
    """Content BioASQ accepts but the answer contract refuses (`bioasq validate --strict` fails
    on it); False: an error BioASQ would refuse the file for."""

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def errors(problems: list[Problem]) -> list[Problem]:
    """Return the problems BioASQ would refuse a file for (not the content warnings)."""
    return [p for p in problems if not p.warning]


def validate_file(
    path: Path,
    *,
    testset_path: Path | None = None,
    phase: str | None = None,
    texts: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Problem]:
    """Validate a submission file; a file that is not JSON is a single problem.

    Raises:
        FormatError: the test set file cannot be read (it is the reference, not the suspect).
    """
    try:
        submission = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        return [Problem(str(path), f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
    except (OSError, UnicodeDecodeError) as exc:
        return [Problem(str(path), f"cannot read: {exc}")]
    testset = None
    if testset_path is not None:
        try:
            testset = json.loads(Path(testset_path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FormatError(f"{testset_path}: cannot read the test set ({exc})") from None
    return validate_submission(submission, testset=testset, phase=phase, texts=texts)


def validate_submission(
    submission: Any,
    *,
    testset: dict | None = None,
    phase: str | None = None,
    texts: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Problem]:
    """Return every problem with a BioASQ Task B submission (parsed JSON); [] when it is fine.

    With neither `phase` nor `testset` the golden files' long lists and slips pass (see the
    module docstring); with either, the submission limits and strict forms apply. Content that
    breaks the answer contract is returned as warnings (`Problem.warning`), in file order.

    Args:
        submission: the parsed JSON.
        testset: the round's test set (parsed JSON); every test question must then be answered
            exactly once and question types come from it.
        phase: "A" (documents and snippets required), "A+" or "B" (exact and ideal answers
            required).
        texts: PMID -> {"title": ..., "abstract": ...} as stored; snippets of these PMIDs must
            quote the stored text at their offsets.

    Raises:
        ValueError: an unknown phase.
        FormatError: a test set without an id and a type for every question.
    """
    check = _Checker(
        phase=check_phase(phase) if phase else None,
        types=_testset_types(testset) if testset is not None else None,
        texts=texts or {},
    )
    check.submission(submission)
    return check.problems


def _testset_types(testset: Any) -> dict[str, str]:
    questions = testset.get("questions") if isinstance(testset, dict) else None
    if not isinstance(questions, list):
        raise FormatError("test set: expected an object with a 'questions' list")
    types = {}
    for i, item in enumerate(questions):
        if (
            not isinstance(item, dict)
            or not item.get("id")
            or item.get("type") not in QUESTION_TYPES
        ):
            raise FormatError(f"test set: questions[{i}] needs an 'id' and a BioASQ 'type'")
        types[item["id"]] = item["type"]
    return types


def _kind(value: Any) -> str:
    """Name a JSON value's type the way the file spells it, with a short preview."""
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    preview = json.dumps(value, ensure_ascii=False)
    preview = preview if len(preview) <= 40 else preview[:37] + "..."
    return f"{names.get(type(value), type(value).__name__)} {preview}"


@dataclass
class _Checker:
    phase: str | None
    types: dict[str, str] | None
    texts: Mapping[str, Mapping[str, str]]

    def __post_init__(self) -> None:
        self.problems: list[Problem] = []
        self.suffix = ""  # " (id ...)" while a question with an id is being checked
        # Submission rules (limits, no golden-file slips) apply once the round is known.
        self.strict = self.phase is not None or self.types is not None

    def add(self, where: str, message: str, *, warning: bool = False) -> None:
        self.problems.append(Problem(where + self.suffix, message, warning))

    def submission(self, data: Any) -> None:
        if not isinstance(data, dict):
            self.add(
                "top level", f"expected a JSON object with a 'questions' list, got {_kind(data)}"
            )
            return
        if "questions" not in data:
            self.add("top level", "missing 'questions'")
            return
        questions = data["questions"]
        if not isinstance(questions, list):
            self.add("questions", f"'questions' must be a list, got {_kind(questions)}")
            return
        first: dict[str, int] = {}
        for i, item in enumerate(questions):
            qid = self.question(f"questions[{i}]", item)
            if qid in first:
                self.add(f"questions[{i}]", f"duplicate id (first at questions[{first[qid]}])")
            elif qid is not None:
                first[qid] = i
            self.suffix = ""
        if self.types is not None:
            for qid in self.types:
                if qid not in first:
                    self.add("questions", f"no answer for test question {qid}")

    def question(self, where: str, item: Any) -> str | None:
        """Check one question; return its id when it has a usable one (and keep it in suffix)."""
        if not isinstance(item, dict):
            self.add(where, f"expected an object, got {_kind(item)}")
            return None
        if "id" not in item:
            self.add(where, "missing 'id'")
            return None
        qid = item["id"]
        if not isinstance(qid, str) or not qid.strip():
            self.add(where, f"'id' must be a non-empty string, got {_kind(qid)}")
            return None
        self.suffix = f" (id {qid})"
        if "body" in item and not isinstance(item["body"], str):
            self.add(where, f"'body' must be a string, got {_kind(item['body'])}")
        qtype = self.question_type(where, qid, item)
        if item.get("documents") is not None:
            self.documents(where, item["documents"])
        if item.get("snippets") is not None:
            self.snippets(where, item["snippets"])
        exact, ideal = item.get("exact_answer"), item.get("ideal_answer")
        shape_problems = len(self.problems)
        if exact is not None:
            self.exact_answer(where, qtype, exact)
        if ideal is not None:
            self.ideal_answer(where, ideal)
        if len(self.problems) == shape_problems:  # content is judged once the shape is right
            body = item.get("body")
            self.content(where, qtype, exact, ideal, body if isinstance(body, str) else None)
        self.phase_rules(where, qtype, item)
        return qid

    def content(
        self, where: str, qtype: str | None, exact: Any, ideal: Any, question: str | None
    ) -> None:
        """Hold a well-shaped answer to the answer contract (a submission's one word): warnings."""
        ideals = ideal if isinstance(ideal, list) else [ideal] if ideal is not None else []
        if any(is_insufficient(text) for text in ideals):
            return  # an honest insufficient-evidence answer: its empty exact answer is allowed
        if ideals and (problem := ideal_problem(ideal, min_words=SUBMISSION_MIN_WORDS)):
            self.add(where, problem, warning=True)
        if exact is None:
            return
        if qtype is None:  # no type to go by: judge by the shape given
            qtype = "yesno" if isinstance(exact, str) else "list"
        if qtype in ("factoid", "list") and (problem := exact_problem(qtype, exact)):
            self.add(where, problem, warning=True)
        elif qtype in ("factoid", "list"):
            # quorum's answers drop a debris item and keep the rest; a submission holds none.
            found = (degenerate_item(i) for i in _items(exact))
            if problem := next((p for p in found if p), None):
                self.add(where, problem, warning=True)
        # A list of ideal answers is several experts' (golden files): they may disagree.
        if problem := contradiction(qtype, exact, ideal, question):
            self.add(where, problem, warning=True)

    def question_type(self, where: str, qid: str, item: dict) -> str | None:
        given = item.get("type")
        if "type" in item and given not in QUESTION_TYPES:
            self.add(
                where, f"'type' must be one of {', '.join(QUESTION_TYPES)}; got {_kind(given)}"
            )
            given = None
        if self.types is None:
            return given
        if qid not in self.types:
            self.add(where, "id is not in the test set")
            return given
        if given is not None and given != self.types[qid]:
            self.add(where, f"type {given!r} differs from the test set's {self.types[qid]!r}")
        return self.types[qid]

    def phase_rules(self, where: str, qtype: str | None, item: dict) -> None:
        if self.phase == "A":
            for key in ("documents", "snippets"):
                if item.get(key) is None:
                    self.add(where, f"phase A needs '{key}' (a list, possibly empty)")
        elif self.phase in ANSWERING_PHASES:
            if qtype is not None and qtype != "summary" and item.get("exact_answer") is None:
                self.add(where, f"phase {self.phase} needs an exact_answer for a {qtype} question")
            if item.get("ideal_answer") is None:
                self.add(where, f"phase {self.phase} needs an ideal_answer")

    def url(self, where: str, value: Any) -> str | None:
        """Check a document URL; return its PMID when the URL is in BioASQ's form."""
        form = pubmed_url("<PMID>")
        if not isinstance(value, str):
            self.add(where, f"expected a URL string '{form}', got {_kind(value)}")
            return None
        loose = PUBMED_URL.fullmatch(value.strip())
        if loose and not self.strict:
            return loose.group(1)  # golden files and test sets use every PubMed form
        problem = written_form_problem(value)
        if problem is None:
            return loose.group(1) if loose else None
        self.add(where, problem)
        return None

    def documents(self, where: str, documents: Any) -> None:
        if not isinstance(documents, list):
            self.add(where, f"'documents' must be a list, got {_kind(documents)}")
            return
        if self.strict and len(documents) > MAX_DOCUMENTS:
            self.add(where, f"{len(documents)} documents; at most {MAX_DOCUMENTS} are allowed")
        first: dict[str, int] = {}
        for j, doc in enumerate(documents):
            if self.url(f"{where}.documents[{j}]", doc) is None:
                continue
            if doc in first:
                self.add(f"{where}.documents[{j}]", f"duplicate of documents[{first[doc]}] ({doc})")
            else:
                first[doc] = j

    def snippets(self, where: str, snippets: Any) -> None:
        if not isinstance(snippets, list):
            self.add(where, f"'snippets' must be a list, got {_kind(snippets)}")
            return
        if self.strict and len(snippets) > MAX_SNIPPETS:
            self.add(where, f"{len(snippets)} snippets; at most {MAX_SNIPPETS} are allowed")
        for j, snippet in enumerate(snippets):
            self.snippet(f"{where}.snippets[{j}]", snippet)

    def snippet(self, where: str, snippet: Any) -> None:
        if not isinstance(snippet, dict):
            self.add(where, f"expected an object, got {_kind(snippet)}")
            return
        missing = [k for k in SNIPPET_KEYS if k not in snippet]
        if missing:
            self.add(where, "missing " + ", ".join(repr(k) for k in missing))
        ok = not missing
        pmid = self.url(f"{where}.document", snippet["document"]) if "document" in snippet else None
        text = snippet.get("text")
        if "text" in snippet and (not isinstance(text, str) or not text.strip()):
            self.add(where, f"'text' must be a non-empty string, got {_kind(text)}")
            ok = False
        for key in ("offsetInBeginSection", "offsetInEndSection"):
            value = snippet.get(key)
            if key not in snippet:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                self.add(where, f"{key} must be a non-negative integer, got {_kind(value)}")
                ok = False
            elif value < 0 and self.strict:
                self.add(where, f"{key} must be non-negative, got {value}")
                ok = False
        for key in ("beginSection", "endSection"):
            value = snippet.get(key)
            if key in snippet and value not in SECTIONS:
                self.add(where, f"{key} must be 'title' or 'abstract', got {_kind(value)}")
                ok = False
        if not ok:
            return
        begin, end = snippet["offsetInBeginSection"], snippet["offsetInEndSection"]
        first, last = snippet["beginSection"], snippet["endSection"]
        if first == "abstract" and last == "title":
            self.add(where, "beginSection 'abstract' comes after endSection 'title'")
        elif first == last and begin > end:
            self.add(where, f"offsetInBeginSection {begin} is after offsetInEndSection {end}")
        elif pmid is not None and pmid in self.texts and begin >= 0:
            self.stored_text(where, self.texts[pmid], snippet)

    def stored_text(self, where: str, stored: Mapping[str, str], snippet: dict) -> None:
        begin, end = snippet["offsetInBeginSection"], snippet["offsetInEndSection"]
        first, last = snippet["beginSection"], snippet["endSection"]
        for key, offset, section in (
            ("offsetInBeginSection", begin, first),
            ("offsetInEndSection", end, last),
        ):
            size = len(stored.get(section) or "")
            if offset > size:
                self.add(
                    where,
                    f"{key} {offset} is past the end of the stored {section} ({size} characters)",
                )
                return
        # A snippet spanning title and abstract has no agreed joining text: offsets only.
        if first == last:
            quoted = (stored.get(first) or "")[begin:end]
            if snippet["text"] != quoted:
                self.add(
                    where, f"'text' differs from the stored {first}[{begin}:{end}] {_kind(quoted)}"
                )

    def exact_answer(self, where: str, qtype: str | None, answer: Any) -> None:
        if qtype is None:  # no type to go by: judge by the shape given
            qtype = "yesno" if isinstance(answer, str) else "list"
        if qtype == "summary":
            self.add(where, "summary questions take no exact_answer; leave it out or use null")
        elif qtype == "yesno":
            if not isinstance(answer, str) or answer.strip().lower() not in ("yes", "no"):
                self.add(where, f'yesno exact_answer must be "yes" or "no", got {_kind(answer)}')
            elif answer not in ("yes", "no") and self.strict:
                lower = answer.strip().lower()
                self.add(where, f"yesno exact_answer must be lower case {lower!r}, got {answer!r}")
        elif not isinstance(answer, list):
            self.add(
                where,
                f"{qtype} exact_answer must be a list of lists of synonyms, got {_kind(answer)}",
            )
        elif answer and all(isinstance(a, str) for a in answer):
            wrapped = json.dumps([[a] for a in answer[:2]])
            wrapped = wrapped[:-1] + ", ...]" if len(answer) > 2 else wrapped
            self.add(
                where,
                f"{qtype} exact_answer is a flat list of strings; wrap each item in its own "
                f"list of synonyms: {wrapped}",
            )
        else:
            if qtype == "factoid" and len(answer) > MAX_FACTOID_CANDIDATES:
                self.add(
                    where,
                    f"factoid exact_answer has {len(answer)} candidates; "
                    f"at most {MAX_FACTOID_CANDIDATES} are allowed",
                )
            for k, item in enumerate(answer):
                self.synonyms(f"{where}.exact_answer[{k}]", item)

    def synonyms(self, where: str, item: Any) -> None:
        if isinstance(item, str):
            self.add(
                where,
                f"expected a list of synonyms, got {_kind(item)}; wrap it: {json.dumps([item])}",
            )
        elif not isinstance(item, list):
            self.add(where, f"expected a list of synonyms, got {_kind(item)}")
        elif not item:
            self.add(where, "empty list of synonyms; give at least one name or drop the item")
        else:
            for n, name in enumerate(item):
                if not isinstance(name, str):
                    self.add(f"{where}[{n}]", f"a synonym must be a string, got {_kind(name)}")
                elif not name.strip() and self.strict:
                    self.add(f"{where}[{n}]", "empty string as a synonym")

    def ideal_answer(self, where: str, answer: Any) -> None:
        if isinstance(answer, str):
            if not answer.strip():
                self.add(where, "ideal_answer is an empty string")
        elif not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
            self.add(
                where, f"ideal_answer must be a string or a list of strings, got {_kind(answer)}"
            )
        elif not any(a.strip() for a in answer):
            self.add(where, "ideal_answer has no text")


def _items(exact: Any) -> list[Any]:
    """Return a factoid or list exact answer's entities, synonyms included."""
    if not isinstance(exact, list):
        return []
    return [i for entry in exact for i in (entry if isinstance(entry, list) else [entry])]
