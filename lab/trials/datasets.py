"""Evaluation cases for `quorum eval methods`, and the plants a simulated reader reads them by.

NaturalQuestions-open with hard distractors (.jsonl or .jsonl.gz; question, answers, ctxs with
the gold passage, as lost-in-the-middle's nq-open-oracle): every question's gold passage and
the `DISTRACTORS` other questions' gold passages that BM25 (k1 0.9, b 0.4, over title and
text, stop words aside) ranks highest for the question, skipping any that holds a gold answer
(whole words, SQuAD-normalised), whose own answer is one, or whose text is shown already. As
in the CoBag paper's noisy split (20 paragraphs, the best-scoring non-supporting one the hard
distractor), the closest `HARD` of them are planted as hard distractors, each with its own
question's first answer (the wrong answer its reader gives); the rest are planted irrelevant
(a reader rarely reads them; one who does gives that passage's own answer). The shown order is
the retriever's: the gold passage and the hard distractors first, in a seeded order (a
retriever finds both near the top and cannot tell them apart, so either may lead), then the
rest, best first. So the reader's position bias, not retrieval, decides whom it believes, and
the order still says what a retriever knows (MoI leans on that prior; with the gold moved
anywhere in the top 5, as lost-in-the-middle moves it, the rank order says nothing about
which passage is useful, and MoI's orientation by it becomes a coin flip: README).

ConflictQA (StrategyQA, GPT-4; .jsonl with parametric_memory, counter_memory and their aligned
evidence) rebuilt into 4-passage yes/no cases: each memory passage with its aligned evidence
planted as its duplicate (same answer, same reading), the two memories planted as each other's
counterfactual; the gold is the ground truth. Which side says yes comes from a negation cue
("not", "no", "never", "cannot", "n't") in exactly one of memory_answer and counter_answer;
a record where both or neither have one is skipped (87 of 1,356). The four are shown in a
seeded order.

Passage ids are numeric (phase B's given documents are PubMed ids): 7LLLLLSS for NQ and
8LLLLLSS for ConflictQA, L the record's line, S its slot, so no passage is shared by two cases.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from infra.bioasq.urls import pubmed_url
from infra.errors import UserError
from lab.trials.answers import normalize

DISTRACTORS = 19
"""Lexically close passages per NQ question: 20 passages, as the CoBag paper's noisy split."""
HARD = 1
"""How many of them (the closest) are planted as hard distractors: one, as CoBag's split."""
GOLD_WITHIN = 1 + HARD
"""The gold passage and the hard distractors take the first this many places, in a seeded order."""
SEARCH_DEPTH = 200
"""BM25 hits looked at per question (answer-bearing ones are skipped)."""
STOP = frozenset(
    re.findall(
        r"\w+",
        "a an the of in on at to for by with from and or is was are were be been do does did "
        "who whom what when where which why how it its this that these those as s",
    )
)
NEGATION = re.compile(r"\b(?:not|no|never|cannot|none|neither|nor)\b|n't\b", re.IGNORECASE)


class DatasetError(UserError):
    """A dataset file that cannot be read as NQ-open or ConflictQA, naming the place."""


@dataclass(frozen=True)
class Passage:
    """One shown passage and what it is planted as."""

    pmid: str
    text: str
    role: str
    """gold, distractor, irrelevant, duplicate or counterfactual (the plant roles)."""
    answer: str = ""
    """What a reader of this passage answers ("" for gold: the question's answer)."""
    of: str | None = None
    """duplicate: the passage it repeats; counterfactual: the passage it contradicts."""


@dataclass(frozen=True)
class MethodCase:
    """One question, its passages in the shown (retriever's) order, and its gold answers."""

    id: str
    question: str
    qtype: str
    gold: tuple[str, ...]
    passages: tuple[Passage, ...]
    kind: str

    def given(self) -> dict[str, Any]:
        """Return phase B's input: the documents and one snippet each, in the shown order."""
        documents = [pubmed_url(p.pmid) for p in self.passages]
        snippets = [
            {
                "document": url,
                "text": p.text,
                "offsetInBeginSection": 0,
                "offsetInEndSection": len(p.text),
                "beginSection": "abstract",
                "endSection": "abstract",
            }
            for url, p in zip(documents, self.passages, strict=True)
        ]
        return {"documents": documents, "snippets": snippets}

    def plant(self) -> dict[str, Any]:
        """Return the case as a planted question (lab/simulate/planted.py's format)."""
        passages = []
        for p in self.passages:
            item: dict[str, Any] = {"pmid": p.pmid, "role": p.role, "text": p.text}
            if p.answer:
                item["answer"] = p.answer
            if p.of:
                item["of"] = p.of
            passages.append(item)
        answer = self.gold[0]
        return {
            "id": self.id,
            "question": self.question,
            "answer": answer,
            "aliases": list(self.gold[1:]),
            "qtype": self.qtype,
            "passages": passages,
        }

    def pairs(self, role: str) -> list[tuple[str, str]]:
        """Return the planted (passage, of) pairs of a role: duplicate or counterfactual."""
        return [(p.pmid, p.of) for p in self.passages if p.role == role and p.of]


def is_correct(case: MethodCase, prediction: str) -> bool:
    """Tell whether an answer is right: yes/no equal, else a gold answer inside it (SubEM)."""
    said = normalize(prediction or "")
    if not said:
        return False
    if case.qtype == "yesno":
        return said == case.gold[0]
    return any((g := normalize(gold)) and g in said for gold in case.gold)


def load_cases(
    path: Path, *, limit: int | None = None, offset: int = 0, seed: int = 0
) -> list[MethodCase]:
    """Read NQ-open or ConflictQA (told apart by their fields) into cases.

    Args:
        path: The dataset file (.jsonl, or .jsonl.gz for NQ).
        limit: At most this many cases.
        offset: Skip this many usable cases first (distractors still come from the whole file).
        seed: Seeds the gold's position (NQ) and the shown order (ConflictQA).

    Raises:
        DatasetError: On a file that cannot be read or holds neither dataset.
    """
    rows = _read_rows(path)
    first = rows[0][1]
    if {"question", "answers", "ctxs"} <= set(first):
        cases = _nq_cases(path, rows, seed, offset + limit if limit is not None else None)
    elif {"parametric_memory", "counter_memory", "ground_truth"} <= set(first):
        cases = _conflictqa_cases(path, rows, seed)
    else:
        raise DatasetError(
            f"{path}: neither NaturalQuestions-open (question, answers, ctxs) nor ConflictQA "
            "(parametric_memory, counter_memory, ground_truth) records"
        )
    return cases[offset:][:limit]


def _read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read ({exc})") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{number}: expected a JSON object per line")
        rows.append((number, row))
    if not rows:
        raise DatasetError(f"{path}: no records")
    return rows


def _pmid(kind: str, line: int, slot: int) -> str:
    return f"{7 if kind == 'nq' else 8}{line:05d}{slot:02d}"


@dataclass
class _NQRow:
    line: int
    question: str
    answers: list[str]
    text: str
    tokens: list[str] = field(default_factory=list)
    words: str = ""


def _nq_row(path: Path, line: int, row: dict[str, Any]) -> _NQRow:
    where = f"{path}:{line}: not a NaturalQuestions-open record"
    question, answers, ctxs = row.get("question"), row.get("answers"), row.get("ctxs")
    if not isinstance(question, str) or not question.strip():
        raise DatasetError(f"{where} ('question' is not a non-empty string)")
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise DatasetError(f"{where} ('answers' is not a list of strings)")
    answers = [a.strip() for a in answers if a.strip()]
    if not answers or not isinstance(ctxs, list) or not ctxs:
        raise DatasetError(f"{where} (no gold answer or no 'ctxs')")
    gold = next((c for c in ctxs if isinstance(c, dict) and c.get("isgold")), ctxs[0])
    if not isinstance(gold, dict) or not isinstance(gold.get("text"), str):
        raise DatasetError(f"{where} (the gold passage has no 'text')")
    title, body = str(gold.get("title") or "").strip(), " ".join(gold["text"].split())
    text = f"{title}: {body}" if title else body
    if line >= 10**5:
        raise DatasetError(f"{path}: more than 99,999 records")
    return _NQRow(line, question.strip(), answers, text, _tokens(text), f" {normalize(text)} ")


def _tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"\w+", text.lower()) if t not in STOP]


class _BM25:
    """Okapi BM25 by bm25s (Pyserini's k1 0.9, b 0.4; Lucene's idf), ties to the earlier passage."""

    def __init__(self, docs: list[list[str]]):
        self.engine = bm25s.BM25(k1=0.9, b=0.4, method="lucene", dtype="float64")
        self.engine.index(docs, show_progress=False)

    def top(self, query: list[str], depth: int) -> list[int]:
        known = [t for t in dict.fromkeys(query) if t in self.engine.vocab_dict]
        if not known:
            return []
        scores = self.engine.get_scores(known)
        order = np.argsort(-scores, kind="stable")[:depth]
        return [int(i) for i in order if scores[i] > 0]


def _nq_cases(
    path: Path, rows: list[tuple[int, dict[str, Any]]], seed: int, wanted: int | None
) -> list[MethodCase]:
    pool = [_nq_row(path, line, row) for line, row in rows]
    index = _BM25([r.tokens for r in pool])
    cases = []
    for number, row in enumerate(pool):
        if wanted is not None and len(cases) >= wanted:
            break
        case = _nq_case(row, number, pool, index, seed)
        if case is not None:
            cases.append(case)
    return cases


def _nq_case(
    row: _NQRow, number: int, pool: list[_NQRow], index: _BM25, seed: int
) -> MethodCase | None:
    golds = [f" {g} " for g in map(normalize, row.answers) if g]
    seen, picked = {row.text}, []
    for other in index.top(_tokens(row.question), SEARCH_DEPTH):
        if len(picked) == DISTRACTORS:
            break
        candidate = pool[other]
        wrong = normalize(candidate.answers[0])
        if (
            other == number
            or candidate.text in seen
            or not wrong
            or any(g in candidate.words or g in f" {wrong} " for g in golds)
        ):
            continue
        seen.add(candidate.text)
        picked.append(candidate)
    if len(picked) < DISTRACTORS:
        return None  # too few lexically close passages to plant a hard case
    passages = [
        Passage(
            _pmid("nq", row.line, slot),
            other.text,
            "distractor" if slot <= HARD else "irrelevant",
            other.answers[0],
        )
        for slot, other in enumerate(picked, 1)
    ]
    gold = Passage(_pmid("nq", row.line, 0), row.text, "gold")
    placed, rest = [gold, *passages[:HARD]], passages[HARD:]
    slots = random.Random(f"{seed}:nq:{row.line}").sample(range(GOLD_WITHIN), len(placed))
    for slot, passage in sorted(zip(slots, placed, strict=True), key=lambda pair: pair[0]):
        rest.insert(slot, passage)
    passages = rest
    return MethodCase(
        id=f"nq-{row.line}",
        question=row.question,
        qtype="factoid",
        gold=tuple(row.answers),
        passages=tuple(passages),
        kind="nq",
    )


def polarity(statement: str) -> str:
    """Return "no" when a statement holds a negation cue, else "yes"."""
    return "no" if NEGATION.search(statement) else "yes"


def _conflictqa_cases(
    path: Path, rows: list[tuple[int, dict[str, Any]]], seed: int
) -> list[MethodCase]:
    keys = ("question", "ground_truth", "memory_answer", "counter_answer", "parametric_memory")
    keys += ("counter_memory", "parametric_memory_aligned_evidence")
    keys += ("counter_memory_aligned_evidence",)
    cases = []
    for line, row in rows:
        if missing := [k for k in keys if k not in row]:
            raise DatasetError(f"{path}:{line}: not a ConflictQA record (missing {missing[0]!r})")
        truth = row["ground_truth"]
        truth = truth[0] if isinstance(truth, list) and truth else truth
        if str(truth) not in ("True", "False") or not all(
            isinstance(row[k], str) for k in keys if k != "ground_truth"
        ):
            raise DatasetError(f"{path}:{line}: not a ConflictQA record (bad ground_truth or text)")
        memory, counter = polarity(row["memory_answer"]), polarity(row["counter_answer"])
        if memory == counter:
            continue  # no negation cue tells the sides apart
        if line >= 10**5:
            raise DatasetError(f"{path}: more than 99,999 records")
        gold = "yes" if str(truth) == "True" else "no"
        memory_side = "gold" if memory == gold else "counterfactual"
        ids = [_pmid("conflictqa", line, slot) for slot in range(4)]
        texts = [
            row["parametric_memory"],
            row["parametric_memory_aligned_evidence"],
            row["counter_memory"],
            row["counter_memory_aligned_evidence"],
        ]
        texts = [" ".join(t.split()) for t in texts]
        first = ids[0] if memory_side == "gold" else ids[2]
        second = ids[2] if first == ids[0] else ids[0]
        other = counter if first == ids[0] else memory
        passages = {
            first: Passage(first, texts[ids.index(first)], "gold"),
            second: Passage(second, texts[ids.index(second)], "counterfactual", other, first),
        }
        for dup, of in ((ids[1], ids[0]), (ids[3], ids[2])):
            passages[dup] = Passage(dup, texts[ids.index(dup)], "duplicate", of=of)
        order = list(ids)
        random.Random(f"{seed}:conflictqa:{line}").shuffle(order)
        cases.append(
            MethodCase(
                id=f"conflictqa-{line}",
                question=" ".join(row["question"].split()),
                qtype="yesno",
                gold=(gold,),
                passages=tuple(passages[p] for p in order),
                kind="conflictqa",
            )
        )
    return cases
