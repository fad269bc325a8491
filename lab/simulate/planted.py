"""Planted QA cases for the simulated reader: what each passage is, says and is worth.

A plant file holds questions, as a JSON list, a JSON object `{"questions": [...]}` or JSONL
(one question per line). A question:

    {"id": "nq-17", "question": "who got the first nobel prize in physics",
     "answer": "Wilhelm Conrad Röntgen",        # a string; a list of items for a list question
     "aliases": ["Röntgen"],                    # other spellings that count as the answer
     "descriptor": "", "entity": "",            # CORG triple of the gold reading (optional)
     "passages": [
       {"pmid": "nq-17-0", "role": "gold", "title": "...", "text": "..."},
       {"pmid": "nq-17-1", "role": "distractor", "answer": "Marie Curie", "utility": 0.8},
       {"pmid": "nq-17-2", "role": "duplicate", "of": "nq-17-0"},
       {"pmid": "nq-17-3", "role": "counterfactual", "answer": "Max Planck"},
       {"pmid": "nq-17-4", "role": "irrelevant"}],
     "relations": [{"a": "nq-17-1", "b": "nq-17-3", "label": "none"}]}   # overrides (optional)

Passages are found in prompts by the id shown after "PMID" (quorum renders "[i] PMID <id>"),
or by their text (`title` + `text`) where a prompt shows passages without ids (CORG's relation
prompt). Roles, and what a passage supports unless it says otherwise:

- gold: the question's answer; utility 1.
- distractor: a hard distractor; its own planted wrong `answer` (required); utility
  `distractor_strength` of the reader settings.
- duplicate: repeats passage `of` (same answer, descriptor, entity and utility).
- counterfactual: contradicts passage `of` (default: the first gold) with its own `answer`
  (required) under the same descriptor; utility 1 (as convincing as gold).
- irrelevant: does not answer; read anyway, it yields its `answer`, else its title, else its
  first words; utility `irrelevant_utility` of the reader settings.

`utility` on a passage overrides its role's. Pair relations (CORG's labels) follow from the
passages unless `relations` names the pair: see `Plants.relation`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES = ("gold", "distractor", "duplicate", "counterfactual", "irrelevant")
RELATION_LABELS = ("duplicated", "counterfactual", "distracting", "ambiguous", "none")
PASSAGE_KEYS = {"pmid", "role", "answer", "utility", "title", "text", "descriptor", "entity", "of"}
QUESTION_KEYS = {"id", "question", "answer", "aliases", "descriptor", "entity", "passages"}
QUESTION_KEYS |= {"relations", "qtype"}


class PlantError(ValueError):
    """A plant file that cannot be read as planted questions."""


@dataclass(frozen=True)
class PlantedPassage:
    """One passage of a planted question, with its defaults resolved."""

    pmid: str
    role: str
    answer: tuple[str, ...]
    """What the passage supports: one string, or the items of a list question."""
    utility: float | None
    """Explicit utility; None takes the role's (see `ReaderSettings.utility`)."""
    title: str = ""
    text: str = ""
    descriptor: str = ""
    entity: str = ""
    of: str | None = None
    """duplicate: the passage repeated; counterfactual: the passage contradicted."""
    root: str = ""
    """The passage a chain of duplicates starts from (itself when not a duplicate)."""

    @property
    def answer_text(self) -> str:
        """Return the answer as one string (a list question's items joined by ", ")."""
        return ", ".join(self.answer)


@dataclass(frozen=True)
class PlantedQuestion:
    """A planted question: its gold answer and its passages by id."""

    id: str
    question: str
    answer: tuple[str, ...]
    aliases: tuple[str, ...]
    passages: dict[str, PlantedPassage]
    descriptor: str = ""
    entity: str = ""
    qtype: str = ""
    relations: dict[frozenset[str], str] = field(default_factory=dict)

    def accepted(self) -> tuple[str, ...]:
        """Return every string that counts as the gold answer."""
        return (*self.answer, ", ".join(self.answer), *self.aliases)


@dataclass(frozen=True)
class Plants:
    """Planted questions, found by the passage ids and texts a prompt shows."""

    questions: tuple[PlantedQuestion, ...]
    digest: str
    """sha256 (16 hex) of the plants as loaded: a run records which plants it met."""
    _by_pmid: dict[str, list[PlantedQuestion]] = field(repr=False, compare=False)

    @classmethod
    def load(cls, source: Plants | str | Path | Sequence[Mapping[str, Any]]) -> Plants:
        """Read plants from a file (JSON or JSONL), a list of question objects, or Plants.

        Raises:
            PlantError: On a missing file, bad JSON, an unknown role or key, a duplicate
                without its original, a distractor without an answer, or a repeated id.
        """
        if isinstance(source, Plants):
            return source
        from_file = isinstance(source, str | Path)
        raw = _read(Path(source)) if from_file else [dict(q) for q in source]
        questions = tuple(_question(q, n) for n, q in enumerate(raw, 1))
        canonical = json.dumps(raw, sort_keys=True, ensure_ascii=False, default=str)
        by_pmid: dict[str, list[PlantedQuestion]] = {}
        for question in questions:
            for pmid in question.passages:
                by_pmid.setdefault(pmid, []).append(question)
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        return cls(questions=questions, digest=digest, _by_pmid=by_pmid)

    def summary(self) -> dict[str, Any]:
        """Return what a run records about the plants: counts and digest."""
        return {
            "questions": len(self.questions),
            "passages": sum(len(q.passages) for q in self.questions),
            "digest": self.digest,
        }

    def locate(self, pmids: Sequence[str], question: str | None = None) -> PlantedQuestion | None:
        """Return the planted question owning most of these ids (its text breaks ties)."""
        counts: dict[str, int] = {}
        owners: dict[str, PlantedQuestion] = {}
        for pmid in pmids:
            for owner in self._by_pmid.get(pmid, []):
                counts[owner.id] = counts.get(owner.id, 0) + 1
                owners[owner.id] = owner
        if not counts:
            return self.by_text(question) if question else None
        asked = _squash(question or "").casefold()
        return max(
            owners.values(),
            key=lambda q: (counts[q.id], _squash(q.question).casefold() == asked),
        )

    def by_text(self, question: str) -> PlantedQuestion | None:
        """Return the planted question with this text (whitespace and case aside), if any."""
        asked = _squash(question).casefold()
        return next((q for q in self.questions if _squash(q.question).casefold() == asked), None)

    def match_text(self, shown: str, within: PlantedQuestion | None) -> list[PlantedPassage]:
        """Return the planted passages this shown text best matches (best first, ties kept).

        A shown text matches a passage whose `title text` (or `text`) starts with it, the way
        a clipped passage does, or that contains it; at least 30 characters must agree.
        """
        wanted = _squash(shown.replace("…", " ")).casefold()
        if not wanted:
            return []
        pool = [within] if within is not None else list(self.questions)
        scored: list[tuple[int, PlantedPassage]] = []
        for question in pool:
            for passage in question.passages.values():
                # A passage planted by id alone has no text to agree with: it matches no text.
                score = max((_agreement(wanted, full) for full in _texts(passage)), default=0)
                if score >= min(30, len(wanted)):
                    scored.append((score, passage))
        best = max((s for s, _ in scored), default=0)
        return [p for s, p in scored if s == best]

    def relation(self, question: PlantedQuestion, a: str, b: str) -> str:
        """Return the planted CORG relation of passages a and b of a question.

        In order: a pair named in the question's `relations`; "none" when either passage is
        unknown or irrelevant; "duplicated" for the same passage or one duplicate chain;
        "distracting" when either is a hard distractor (about another entity or sense);
        then the paper's rule on (descriptor, answer), as prompts/organize_relation.md words
        it: same descriptor → duplicated (same answer) or counterfactual (different answer);
        different descriptors, neither empty → distracting; one empty → ambiguous (same
        answer) or none (different answer).
        """
        if (label := question.relations.get(frozenset((a, b)))) is not None:
            return label
        first, second = question.passages.get(a), question.passages.get(b)
        if first is None or second is None or "irrelevant" in (first.role, second.role):
            return "none"
        if first.root == second.root:
            return "duplicated"
        if "distractor" in (first.role, second.role):
            return "distracting"
        same_answer = _answer_key(first) == _answer_key(second)
        if first.descriptor == second.descriptor:
            return "duplicated" if same_answer else "counterfactual"
        if first.descriptor and second.descriptor:
            return "distracting"
        return "ambiguous" if same_answer else "none"


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlantError(f"cannot read plant file {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if data is None:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise PlantError(f"{path}: neither JSON nor JSONL ({exc})") from None
    if isinstance(data, dict):
        data = data.get("questions", [data] if "passages" in data else None)
    if not isinstance(data, list) or not all(isinstance(q, dict) for q in data):
        raise PlantError(f"{path}: expected a list of question objects")
    return data


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise PlantError(f"{where}: expected a string or a list of strings, got {value!r}")


def _question(raw: dict[str, Any], number: int) -> PlantedQuestion:
    qid = str(raw.get("id") or f"q{number}")
    where = f"planted question {qid!r}"
    if unknown := set(raw) - QUESTION_KEYS:
        raise PlantError(f"{where}: unknown key(s) {sorted(unknown)}")
    if not isinstance(raw.get("question"), str) or not raw["question"].strip():
        raise PlantError(f"{where}: needs a non-empty 'question'")
    answer = _strings(raw.get("answer"), f"{where} answer")
    if not answer:
        raise PlantError(f"{where}: needs its gold 'answer'")
    items = raw.get("passages")
    if not isinstance(items, list) or not items:
        raise PlantError(f"{where}: needs a non-empty 'passages' list")
    given: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict) or not str(item.get("pmid") or "").strip():
            raise PlantError(f"{where}: every passage needs a 'pmid', got {item!r}")
        pmid = str(item["pmid"]).strip()
        if pmid in given:
            raise PlantError(f"{where}: passage {pmid!r} is planted twice")
        if unknown := set(item) - PASSAGE_KEYS:
            raise PlantError(f"{where}, passage {pmid!r}: unknown key(s) {sorted(unknown)}")
        if item.get("role") not in ROLES:
            raise PlantError(f"{where}, passage {pmid!r}: role must be one of {ROLES}")
        given[pmid] = item
    question = PlantedQuestion(
        id=qid,
        question=raw["question"].strip(),
        answer=answer,
        aliases=_strings(raw.get("aliases"), f"{where} aliases"),
        passages={},
        descriptor=str(raw.get("descriptor") or ""),
        entity=str(raw.get("entity") or ""),
        qtype=str(raw.get("qtype") or ""),
    )
    gold = next((p for p, item in given.items() if item["role"] == "gold"), None)
    for pmid in given:
        question.passages[pmid] = _passage(pmid, given, question, gold, where, ())
    for rule in raw.get("relations") or []:
        a, b, label = (str(rule.get(k, "")) for k in ("a", "b", "label"))
        if label not in RELATION_LABELS or a not in given or b not in given:
            raise PlantError(f"{where}: relation {rule!r} needs planted a, b and a CORG label")
        question.relations[frozenset((a, b))] = label
    return question


def _passage(
    pmid: str,
    given: dict[str, dict[str, Any]],
    question: PlantedQuestion,
    gold: str | None,
    where: str,
    chain: tuple[str, ...],
) -> PlantedPassage:
    if pmid in question.passages:
        return question.passages[pmid]
    item, here = given[pmid], f"{where}, passage {pmid!r}"
    if pmid in chain:
        raise PlantError(f"{here}: duplicates form a cycle {' → '.join((*chain, pmid))}")
    role, of = item["role"], item.get("of")
    utility = item.get("utility")
    if utility is not None and (not isinstance(utility, int | float) or utility < 0):
        raise PlantError(f"{here}: utility must be a number >= 0")
    base = {
        "pmid": pmid,
        "role": role,
        "utility": None if utility is None else float(utility),
        "title": str(item.get("title") or ""),
        "text": str(item.get("text") or ""),
        "entity": str(item.get("entity") or question.entity),
    }
    answer = _strings(item.get("answer"), f"{here} answer")
    descriptor = item.get("descriptor")
    if role == "duplicate":
        if of not in given or of == pmid:
            raise PlantError(f"{here}: a duplicate needs 'of', another planted passage")
        original = _passage(of, given, question, gold, where, (*chain, pmid))
        if utility is None:
            base["utility"] = original.utility
        return PlantedPassage(
            **base,
            answer=answer or original.answer,
            descriptor=original.descriptor if descriptor is None else str(descriptor),
            of=of,
            root=original.root,
        )
    if role in ("distractor", "counterfactual") and not answer:
        raise PlantError(f"{here}: a {role} needs its own planted 'answer'")
    if role == "gold":
        answer = answer or question.answer
    elif role == "irrelevant" and not answer:
        answer = (base["title"] or " ".join(base["text"].split()[:4]) or "no answer",)
    if role == "counterfactual":
        of = of or gold
        if of is not None and of not in given:
            raise PlantError(f"{here}: 'of' names no planted passage")
        if descriptor is None and of is not None and of != pmid:
            descriptor = _passage(of, given, question, gold, where, (*chain, pmid)).descriptor
    if descriptor is None:
        descriptor = question.descriptor if role in ("gold", "counterfactual") else ""
    return PlantedPassage(**base, answer=answer, descriptor=str(descriptor), of=of, root=pmid)


def _answer_key(passage: PlantedPassage) -> tuple[str, ...]:
    return tuple(sorted(_squash(a).casefold() for a in passage.answer))


def _squash(text: str) -> str:
    return " ".join(text.split())


def _texts(passage: PlantedPassage) -> list[str]:
    texts = (f"{passage.title} {passage.text}", passage.text)
    return [t for t in (_squash(t).casefold() for t in texts) if t]


def _agreement(shown: str, full: str) -> int:
    """Return how many characters of the shown text agree with the full one."""
    if shown in full:
        return len(shown)
    same = 0
    for x, y in zip(shown, full, strict=False):
        if x != y:
            break
        same += 1
    return same
