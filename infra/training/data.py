"""Golden files and a corpus to training rows: positives, BM25 hard negatives, a dev split."""

from __future__ import annotations

import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from infra.bioasq.formats import Question, load_questions
from infra.bioasq.urls import pubmed_url
from infra.embeddings import document_text
from infra.errors import UserError
from infra.search.corpus import read_jsonl
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_open import remove_index
from infra.search.keywords import keyword_query
from infra.search.query import QueryError

DEPTH = 100
"""BM25 hits kept per training question: its hard negatives come from them."""
DEV_DEPTH = 1000
"""BM25 hits kept per dev question: the fusion weight is chosen by fusing them all with cosine,
as rerank fuses every candidate. Fusing only the top 50 chose α = 0.9 for the model trained on
7B–10B, where 0.6 was better on 11B: over a short head a high cosine weight only reorders
documents BM25 already ranked well, and cannot be punished for promoting its own mistakes."""


class TrainingInputError(UserError):
    """Training files that cannot be used as given."""


@dataclass
class Example:
    """One training question: its gold documents in the corpus and its BM25 hits."""

    question: Question
    gold: list[str]
    hits: list[tuple[str, float]] = field(default_factory=list)

    @property
    def negatives(self) -> list[str]:
        """Return BM25's non-gold hits, best first (the hard negatives)."""
        gold = set(self.question.documents)
        return [p for p, _ in self.hits if p not in gold]


@dataclass
class TrainingData:
    """Questions split into train and dev, the corpus they point into, and what was dropped."""

    train: list[Example]
    dev: list[Example]
    docs: dict[str, dict[str, Any]]
    files: list[str]
    corpus_files: list[str]
    skipped: int

    def text(self, pmid: str) -> str:
        """Return the text a document is embedded and scored from."""
        doc = self.docs[pmid]
        return document_text(doc.get("title", ""), doc.get("abstract", ""))

    def summary(self) -> dict[str, Any]:
        """Return what the card records about the data."""
        return {
            "golden_files": self.files,
            "corpus_files": self.corpus_files,
            "corpus_documents": len(self.docs),
            "train_questions": len(self.train),
            "dev_questions": len(self.dev),
            "questions_without_gold_in_corpus": self.skipped,
        }


def check_inputs(questions: Sequence[Path], corpus: Sequence[Path], output: Path | None) -> None:
    """Fail on a missing file or an output directory that already holds something."""
    if not questions:
        raise TrainingInputError("no --questions given; pass BioASQ golden JSON files")
    if not corpus:
        raise TrainingInputError("no --corpus given; pass the .jsonl(.gz) holding their documents")
    for path in [*questions, *corpus]:
        if not Path(path).is_file():
            raise TrainingInputError(f"{path}: no such file; check the path")
    if output is not None and output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise TrainingInputError(
            f"{output} exists and is not empty; choose a new --output directory"
        )


def read_golden(questions: Sequence[Path]) -> list[Question]:
    """Read golden files, refusing one whose questions list no gold documents."""
    loaded: list[Question] = []
    for path in questions:
        batch = load_questions(Path(path))
        if not any(q.documents for q in batch):
            raise TrainingInputError(
                f"{path}: no question lists gold 'documents'; training needs golden files"
            )
        loaded.extend(batch)
    return loaded


def load_training(
    questions: Sequence[Path],
    corpus: Sequence[Path],
    *,
    seed: int,
    dev_fraction: float,
    dev_max: int,
) -> TrainingData:
    """Read golden files and corpus, mine BM25 hits and carve the dev split."""
    loaded = read_golden(questions)
    docs = _read_corpus(corpus)
    examples, skipped = [], 0
    for question in loaded:
        gold = [p for p in dict.fromkeys(question.documents) if p in docs]
        if gold:
            examples.append(Example(question, gold))
        else:
            skipped += 1
    if not examples:
        raise TrainingInputError(
            "none of the questions' gold documents is in the corpus; pass the corpus that "
            "holds them (--corpus)"
        )
    train, dev = carve_dev(examples, seed=seed, dev_fraction=dev_fraction, dev_max=dev_max)
    _mine([(train, DEPTH), (dev, DEV_DEPTH)], docs)
    return TrainingData(
        train=train,
        dev=dev,
        docs=docs,
        files=[Path(p).name for p in questions],
        corpus_files=[Path(p).name for p in corpus],
        skipped=skipped,
    )


def carve_dev(
    examples: Sequence[Example], *, seed: int, dev_fraction: float, dev_max: int
) -> tuple[list[Example], list[Example]]:
    """Split examples into (train, dev), the same way for the same seed and examples."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_dev = min(dev_max, round(len(examples) * dev_fraction)) if len(examples) > 1 else 0
    n_dev = max(n_dev, 1) if len(examples) > 1 else 0
    dev_ids = set(order[:n_dev])
    train = [e for i, e in enumerate(examples) if i not in dev_ids]
    dev = [e for i, e in enumerate(examples) if i in dev_ids]
    return train, dev


def golden_file(examples: Sequence[Example]) -> dict[str, Any]:
    """Return examples' questions as a BioASQ golden file (documents as PubMed URLs)."""
    return {
        "questions": [
            {
                "id": e.question.id,
                "type": e.question.type,
                "body": e.question.body,
                "documents": [pubmed_url(p) for p in e.question.documents],
                "snippets": e.question.snippets,
                **({"exact_answer": e.question.exact_answer} if e.question.exact_answer else {}),
                **({"ideal_answer": e.question.ideal_answer} if e.question.ideal_answer else {}),
            }
            for e in examples
        ]
    }


def _read_corpus(paths: Sequence[Path]) -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {}
    for path in paths:
        try:
            for doc in read_jsonl(Path(path)):
                if isinstance(doc, dict):
                    docs[str(doc["pmid"]).strip()] = doc
        except ValueError as exc:
            raise TrainingInputError(f"{exc}; the corpus must be PubMed JSON lines") from None
        except (OSError, EOFError) as exc:
            raise TrainingInputError(f"{path}: cannot read ({exc})") from None
    if not docs:
        raise TrainingInputError(f"{', '.join(map(str, paths))}: no documents in the corpus")
    return docs


def _mine(groups: list[tuple[list[Example], int]], docs: dict[str, dict[str, Any]]) -> None:
    """Search every question with BM25 over a throwaway embedded index of the corpus.

    `groups`: examples and how many hits each keeps.
    """
    tmp = Path(tempfile.mkdtemp(prefix="quorum-train-bm25-"))
    try:
        index = EmbeddedIndex.build(tmp / "index", docs.values())
        todo = [(example, depth) for examples, depth in groups for example in examples]
        for example, depth in tqdm(
            todo, desc="BM25 negatives", unit=" q", file=sys.stderr, disable=None
        ):
            try:
                found = index.search(keyword_query(example.question.body), depth)
            except QueryError:
                continue  # a question with no searchable words still trains on its gold
            example.hits = found.hits
    finally:
        remove_index(tmp)


def retrieval_rows(
    data: TrainingData, examples: Sequence[Example], *, max_positives: int, seed: int
) -> dict[str, list[str]]:
    """Return (anchor, positive, negative) columns: one row per gold document, capped."""
    rng = random.Random(seed)
    rows: dict[str, list[str]] = {"anchor": [], "positive": [], "negative": []}
    for example in examples:
        negatives = example.negatives[:30] or _random_negatives(data, example, rng, 30)
        for i, pmid in enumerate(example.gold[:max_positives]):
            rows["anchor"].append(example.question.body)
            rows["positive"].append(data.text(pmid))
            rows["negative"].append(data.text(negatives[i % len(negatives)]))
    return rows


def rerank_rows(
    data: TrainingData,
    examples: Sequence[Example],
    *,
    negatives: int,
    seed: int,
    max_positives: int = 1,
) -> dict[str, list[str]]:
    """Return (anchor, positive, negative_1..n) columns: a row per gold document.

    At most `max_positives` gold documents a question, drawn at random (1, the default: a row
    per question).
    """
    rng = random.Random(seed)
    columns = ["anchor", "positive", *(f"negative_{i + 1}" for i in range(negatives))]
    rows: dict[str, list[str]] = {c: [] for c in columns}
    for example in examples:
        pool = example.negatives[:30]
        if len(pool) < negatives:
            pool += _random_negatives(data, example, rng, negatives - len(pool))
        if max_positives == 1:  # as the measured models were trained (same draws, same seed)
            golds = [rng.choice(example.gold)]
        else:
            golds = rng.sample(example.gold, min(max_positives, len(example.gold)))
        for gold in golds:
            chosen = rng.sample(pool, negatives)
            rows["anchor"].append(example.question.body)
            rows["positive"].append(data.text(gold))
            for column, pmid in zip(columns[2:], chosen, strict=True):
                rows[column].append(data.text(pmid))
    return rows


def _random_negatives(
    data: TrainingData, example: Example, rng: random.Random, n: int
) -> list[str]:
    """Return corpus documents outside the gold when BM25 found too few (tiny corpora)."""
    gold = set(example.question.documents) | {p for p, _ in example.hits}
    pool = sorted(p for p in data.docs if p not in gold) or sorted(
        p for p in data.docs if p not in set(example.question.documents)
    )
    if not pool:
        raise TrainingInputError(
            "the corpus holds only gold documents; add other documents to learn from"
        )
    return [rng.choice(pool) for _ in range(n)]
