"""Sentence-level rows: (question, sentence) pairs from the gold snippets of golden files.

Positives are sentences of gold documents that overlap a gold snippet; negatives are the other
sentences of the gold documents and the sentences of BM25's non-gold hits.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from infra.bioasq.urls import pmid_of
from infra.snippets import sentences
from infra.training.data import Example, TrainingData
from infra.training.dev import DevGroup

BM25_DOCS = 5
"""Non-gold BM25 hits whose sentences join the negatives (and the dev candidates)."""


def labelled_sentences(data: TrainingData, example: Example) -> tuple[list[str], list[str]]:
    """Return (positive, negative) sentences for one question."""
    spans: dict[str, list[str]] = {}
    for snippet in example.question.snippets:
        try:
            pmid = pmid_of(str(snippet.get("document", "")))
        except ValueError:
            continue
        text = " ".join(str(snippet.get("text", "")).split())
        if text:
            spans.setdefault(pmid, []).append(text)
    positives, negatives = [], []
    for pmid in example.gold:
        gold = spans.get(pmid, [])
        for sentence in _sentences(data, pmid):
            (positives if any(_overlaps(sentence, g) for g in gold) else negatives).append(sentence)
    for pmid in example.negatives[:BM25_DOCS]:
        negatives.extend(_sentences(data, pmid))
    return list(dict.fromkeys(positives)), list(dict.fromkeys(negatives))


def sentence_rows(
    data: TrainingData,
    examples: Sequence[Example],
    *,
    negatives: int,
    seed: int,
    max_positives: int = 4,
) -> dict[str, list[str]]:
    """Return (anchor, positive, negative_1..n) columns: a row per positive sentence.

    At most `max_positives` positive sentences a question, in the order of their documents.
    """
    rng = random.Random(seed)
    columns = ["anchor", "positive", *(f"negative_{i + 1}" for i in range(negatives))]
    rows: dict[str, list[str]] = {c: [] for c in columns}
    for example in examples:
        positives, pool = labelled_sentences(data, example)
        if not positives or not pool:
            continue
        for positive in positives[:max_positives]:
            chosen = (
                rng.sample(pool, negatives)
                if len(pool) >= negatives
                else [rng.choice(pool) for _ in range(negatives)]
            )
            rows["anchor"].append(example.question.body)
            rows["positive"].append(positive)
            for column, sentence in zip(columns[2:], chosen, strict=True):
                rows[column].append(sentence)
    return rows


def sentence_groups(data: TrainingData, examples: Sequence[Example]) -> list[DevGroup]:
    """Return each dev question's candidate sentences with the positive ones as gold."""
    groups = []
    for example in examples:
        positives, negatives = labelled_sentences(data, example)
        if positives:
            texts = positives + negatives
            groups.append((example.question.body, texts, texts, positives, [], []))
    return groups


def _sentences(data: TrainingData, pmid: str) -> list[str]:
    doc = data.docs.get(pmid) or {}
    out = []
    for section in ("title", "abstract"):
        text = doc.get(section) or ""
        out += [" ".join(text[b:e].split()) for b, e in sentences(text)]
    return out


def _overlaps(sentence: str, snippet: str) -> bool:
    """Tell whether a sentence lies in a snippet or a snippet in it (they share their text)."""
    return sentence in snippet or snippet in sentence or _shared_words(sentence, snippet) >= 0.8


def _shared_words(sentence: str, snippet: str) -> float:
    words = sentence.lower().split()
    if not words:
        return 0.0
    other = set(snippet.lower().split())
    return sum(w in other for w in words) / len(words)
