"""A reader with planted biases: it weighs the passages it is shown and reads one.

Each shown passage k at position j (0-based, of n shown) weighs

    w_k = utility(k) × curve(j, n)

utility comes from the plants (gold 1, hard distractor `distractor_strength`, irrelevant
`irrelevant_utility`, or the passage's own); the curve is the position bias:

    liu      1 − s·(1 − r(x))/(1 − r_min), r = Liu et al.'s measured accuracy by position over
             the best (gpt-3.5-turbo, 20 documents; `calibration.py`), interpolated over x;
             at the default s = 0.290 the weights are the measured relative accuracies
    u        1 − s·g(x)/max g, g(x) = 4x(1 − x) + 0.3x
                               lost in the middle: first 1, last 1 − 0.26s, least 1 − s
    primacy  1 − s·x
    recency  1 − s·(1 − x)
    flat     1                 no position bias (a control)

with x = j / (n − 1) (x = 0 when n = 1) and s the `strength`.

A chat completion reads ONE passage, drawn with probability w_k / Σw from an RNG seeded by
(seed, the question, the shown passages in order): the same view always gets the same greedy
reading, whatever instructions surround it (so strategies showing the same views are compared
paired), and another order of the same passages another, reproducible one. A sampled call
(temperature T > 0) keeps the greedy reading's answer with probability sample_agreement^T,
else reads a passage giving another answer (`sampling.py`); its n-th sample of one prompt is
seeded by n, so K identical requests give a reproducible multiset of answers.

Log-probabilities: an answer a after a prompt showing passages has probability
(1 − floor)·share(a) + floor, share(a) = Σ w_k / Σ w over shown passages supporting a (how
often a greedy reading of the prompt answers a over seeds). The question q after the passages
has

    log P(q | π) = (1 − λ)·Σ_j ā_j·log u_j + λ·log Σ_j ā_j·u_j + σ·ε(π)

with u_j = max(utility(π_j), floor), ā = curve / Σ curve, λ the `interaction` (a saturating
aggregate: one useful passage lifts the whole context, so positions interact) and ε a standard
normal seeded by the prompt's view, σ the `logprob_noise`. At λ = σ = 0 it is exactly MoI's
model, linear in position weights that sum to 1; by default it is not.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infra.bioasq.answers import normalize_answer
from lab.simulate.bias import (
    CURVES,
    ReaderSettings,
    position_curve,
    settings_from_pairs,
)
from lab.simulate.planted import PlantedPassage, PlantedQuestion, Plants
from lab.simulate.prompt_text import continuation_start, numbered_passages, question_of

__all__ = [
    "CURVES",
    "READER_HEADER",
    "PlantedReader",
    "ReaderSettings",
    "Reading",
    "Seen",
    "position_curve",
    "settings_from_pairs",
]

READER_HEADER = "x-quorum-reader"
"""Response header carrying `PlantedReader.describe()` as compact JSON."""


@dataclass(frozen=True)
class Seen:
    """A passage as the reader saw it: where, what it supports, what it weighs."""

    number: int
    """Its number in the prompt ("[number] PMID …")."""
    position: int
    """0-based order of appearance."""
    pmid: str
    body: str
    """The shown title line and text, verbatim."""
    passage: PlantedPassage
    utility: float
    weight: float
    keys: frozenset[str]
    """Normalised strings that count as this passage's answer."""


@dataclass(frozen=True)
class Reading:
    """What the reader makes of a prompt that shows numbered passages."""

    question: PlantedQuestion
    asked: str
    """The question as the prompt words it ("" when it has no "Question:" line)."""
    seen: tuple[Seen, ...]
    end: int
    """Offset just past the last passage in the prompt text."""

    @property
    def total(self) -> float:
        """Return the summed weight of the shown passages."""
        return sum(s.weight for s in self.seen)

    def share(self, answer: str | Sequence[str]) -> float:
        """Return the weight share of shown passages that support this answer (any item)."""
        total = self.total
        support = sum(s.weight for s in self.supporting(answer))
        return support / total if total > 0 else 0.0

    def draw(self, rng: random.Random) -> Seen:
        """Return one shown passage, drawn with probability weight / total."""
        total = self.total
        if total <= 0:
            return self.seen[0]
        roll, edge = rng.random() * total, 0.0
        for seen in self.seen:
            edge += seen.weight
            if roll < edge:
                return seen
        return self.seen[-1]

    def supporting(self, answer: str | Sequence[str]) -> list[Seen]:
        """Return the shown passages supporting this answer (any item), heaviest first."""
        items = [answer] if isinstance(answer, str) else list(answer)
        keys = {normalize_answer(a) for a in (*items, ", ".join(items))} - {""}
        return sorted(
            (s for s in self.seen if s.keys & keys), key=lambda s: (-s.weight, s.position)
        )


@dataclass(frozen=True)
class Scored:
    """A /completions prompt's continuation as the reader scores it."""

    start: int
    """Offset in the prompt where the continuation starts."""
    logprob: float
    """log P(continuation | everything before it), spread over its tokens."""
    kind: str
    """"answer" or "question"."""


class PlantedReader:
    """Reads prompts against planted questions; thread-safe, deterministic."""

    def __init__(self, plants: Plants, settings: ReaderSettings | None = None):
        """Read with these plants and settings (defaults: `ReaderSettings()`)."""
        self.plants = plants
        self.settings = settings or ReaderSettings()
        self.records: list[dict[str, Any]] = []
        """Every reading and scoring made, for audit (kind, question, shown, read, answer…)."""
        self._samples: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """Return what a run records: the mode, the settings and the plants' digest."""
        return {"mode": "planted", **self.settings.as_dict(), "plants": self.plants.summary()}

    def fingerprint(self) -> str:
        """Return `describe()` as compact JSON (header and `system_fingerprint` value)."""
        return json.dumps(self.describe(), separators=(",", ":"), sort_keys=True)

    def record(self, entry: dict[str, Any]) -> None:
        """Keep one audit record."""
        with self._lock:
            self.records.append(entry)

    def rng(self, texts: Sequence[str], salt: str = "") -> random.Random:
        """Return the RNG of one prompt: seeded by the settings' seed and the texts."""
        digest = hashlib.sha256(
            json.dumps([self.settings.seed, salt, list(texts)], ensure_ascii=False).encode()
        ).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def reading(self, text: str) -> Reading | None:
        """Return the reader's view of a prompt, or None when no shown passage is planted."""
        blocks = numbered_passages(text)
        if not blocks:
            return None
        asked = question_of(text[blocks[-1].end :]) or question_of(text) or ""
        question = self.plants.locate([b.pmid for b in blocks], asked)
        if question is None:
            return None
        curve = position_curve(self.settings.curve, self.settings.strength, len(blocks))
        seen = []
        for j, block in enumerate(blocks):
            passage = question.passages.get(block.pmid) or _unplanted(block.pmid, block.body)
            utility = self.settings.utility(passage, question)
            seen.append(
                Seen(
                    number=block.number,
                    position=j,
                    pmid=block.pmid,
                    body=block.body,
                    passage=passage,
                    utility=utility,
                    weight=utility * curve[j],
                    keys=answer_keys(passage, question),
                )
            )
        return Reading(question, asked, tuple(seen), blocks[-1].end)

    def score(self, prompt: str) -> Scored | None:
        """Return the log-probability of the continuation a /completions prompt ends with.

        The continuation is what follows the last "Question:" or "Answer:" after the
        passages (else a planted answer the prompt ends with). After "Answer:", or as a
        planted answer: log((1 − floor)·share(a) + floor). After "Question:":
        `question_logprob`. None when the prompt shows no planted passage or has no
        continuation.
        """
        reading = self.reading(prompt)
        if reading is None:
            return None
        found = continuation_start(prompt, reading.end) or self._answer_suffix(prompt, reading)
        if found is None or not prompt[found[0] :].strip():
            return None
        start, kind = found
        floor = self.settings.floor
        if kind == "answer":
            share = reading.share(prompt[start:].strip())
            logprob = math.log((1.0 - floor) * share + floor)
        else:
            logprob = self.question_logprob(reading)
        self.record(
            {
                "kind": "score",
                "question": reading.question.id,
                "shown": [s.pmid for s in reading.seen],
                "continuation": kind,
                "logprob": logprob,
            }
        )
        return Scored(start=start, logprob=logprob, kind=kind)

    def question_logprob(self, reading: Reading) -> float:
        """Return log P(q | passages) of a reading (see the module's docstring); always < 0."""
        settings = self.settings
        curve = position_curve(settings.curve, settings.strength, len(reading.seen))
        position = [c / sum(curve) for c in curve]
        useful = [max(s.utility, settings.floor) for s in reading.seen]
        linear = sum(a * math.log(u) for a, u in zip(position, useful, strict=True))
        saturating = math.log(sum(a * u for a, u in zip(position, useful, strict=True)))
        value = (1.0 - settings.interaction) * linear + settings.interaction * saturating
        if settings.logprob_noise > 0:
            value += settings.logprob_noise * self.view_rng(reading, "logprob").gauss(0.0, 1.0)
        return min(value, -settings.floor)

    def view_rng(self, reading: Reading, salt: str = "") -> random.Random:
        """Return the RNG of what a prompt shows: the question and the passages in order."""
        return self.rng([reading.question.id, *(s.pmid for s in reading.seen)], salt)

    def next_sample(self, key: Sequence[Any]) -> int:
        """Return how many sampled calls this key (view, temperature) had before this one."""
        with self._lock:
            index = self._samples.get(tuple(key), 0)
            self._samples[tuple(key)] = index + 1
        return index

    def _answer_suffix(self, prompt: str, reading: Reading) -> tuple[int, str] | None:
        text = prompt.rstrip()
        candidates = {a for p in reading.question.passages.values() for a in p.answer}
        candidates |= set(reading.question.accepted())
        for answer in sorted(candidates, key=len, reverse=True):
            if answer and text.endswith(answer) and len(text) - len(answer) >= reading.end:
                return len(text) - len(answer), "answer"
        return None


def answer_keys(passage: PlantedPassage, question: PlantedQuestion) -> frozenset[str]:
    """Return the normalised strings that count as a passage's answer (gold: its aliases)."""
    keys = {normalize_answer(a) for a in (*passage.answer, passage.answer_text)}
    gold = {normalize_answer(a) for a in question.accepted()}
    if keys & gold and passage.role != "irrelevant":
        keys |= gold
    return frozenset(k for k in keys if k)


def _unplanted(pmid: str, body: str) -> PlantedPassage:
    """Return an irrelevant passage standing for a shown one the plants do not know."""
    first = body.strip().split("\n", 1)[0]
    answer = " ".join(first.split()[:6]) or "no answer"
    return PlantedPassage(pmid=pmid, role="irrelevant", answer=(answer,), utility=None, root=pmid)
