"""Sentence-level rows: (question, sentence) pairs from the gold snippets of golden files.

Positives are sentences of gold documents that overlap a gold snippet; negatives are the other
sentences of the gold documents and the sentences of BM25's non-gold hits.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from infra.bioasq.measures import evaluate_phase_a
from infra.bioasq.urls import pmid_of, pubmed_url
from infra.rerankers import Reranker
from infra.settings import SnippetSettings
from infra.snippets import choose_snippets, located, score_sentences, sentences
from infra.training.data import Example, TrainingData, golden_file
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


SELECTION_DOCUMENTS = (5, 10)
"""Top documents snippets may come from, tried on dev (snippets.documents)."""
SELECTION_FLOORS: tuple[float | None, ...] = (None, *(round(0.1 * i, 1) for i in range(1, 10)))
"""Score floors tried on dev (snippets.min_score): a CrossEncoder's scores are probabilities."""
EDITION = 12
"""Snippets scored as the organizers' current evaluator scores them (mean F over offsets)."""


def snippet_selection(
    data: TrainingData, examples: Sequence[Example], scorer: Reranker
) -> list[dict[str, Any]]:
    """Return phase-A snippet F-measure on dev for each selection setting, the best first.

    Each dev question's top documents of the first stage training used (BM25, or BM25 fused
    with --retriever) are split and scored by `scorer` once, then snippets are chosen from them
    as finalize chooses them (`choose_snippets`: merged spans, 10 at most, 5 a document) for
    every number of documents and floor, and scored with the BioASQ evaluator. The floor is in
    the model's own units, so it is chosen here with the model rather than left at the setting's
    default; `quorum eval snippets` on the dev questions tries it behind the whole pipeline.
    """
    asked = [e for e in examples if e.question.snippets and e.hits]
    depth = max(SELECTION_DOCUMENTS)
    scored, ranked = {}, {}
    for example in tqdm(
        asked, desc="dev snippets", unit=" q", file=sys.stderr, mininterval=1.0, disable=None
    ):
        docs = [
            {"pmid": pmid, **{s: data.docs[pmid].get(s) or "" for s in ("title", "abstract")}}
            for pmid, _ in example.hits[:depth]
        ]
        ranked[example.question.id] = [pubmed_url(p) for p, _ in example.hits[:10]]
        scored[example.question.id] = score_sentences(
            example.question.body, docs, None, scorer=scorer
        )
    if not scored:
        return []
    gold = golden_file(asked)
    for question in gold["questions"]:
        # Scored against the text, not offsets that miss it: the shared corpus, rebuilt from
        # snippets, has half of them elsewhere, which would blur every setting's F alike.
        question["snippets"] = [
            located(s, data.docs.get(_pmid(s), {})) or s for s in question["snippets"]
        ]
    defaults = SnippetSettings()
    rows = []
    for documents, floor in itertools.product(SELECTION_DOCUMENTS, SELECTION_FLOORS):
        chosen = {
            qid: choose_snippets(
                found,
                limit=defaults.limit,
                per_doc=defaults.per_document,
                documents=documents,
                min_score=floor,
                merge=defaults.merge,
            )
            for qid, found in scored.items()
        }
        submission = {
            "questions": [
                {"id": q, "documents": ranked[q], "snippets": s} for q, s in chosen.items()
            ]
        }
        measures = evaluate_phase_a(gold, submission, edition=EDITION)
        rows.append(
            {
                "documents": documents,
                "min_score": floor,
                "snippets_f1": round(measures["snippets_f1"], 4),
                "snippets_precision": round(measures["snippets_precision"], 4),
                "snippets_recall": round(measures["snippets_recall"], 4),
                "snippets_per_question": round(sum(map(len, chosen.values())) / len(chosen), 2),
            }
        )
    # Ties go to fewer documents and no floor: the settings' defaults where they do as well.
    return sorted(rows, key=lambda r: -r["snippets_f1"])


def _pmid(snippet: dict[str, Any]) -> str:
    try:
        return pmid_of(str(snippet.get("document", "")))
    except ValueError:
        return ""
