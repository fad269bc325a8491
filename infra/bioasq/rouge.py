"""Ideal-answer ROUGE-2 and ROUGE-SU4: an approximation, not the organizers' own run.

The official Task B evaluator (infra/bioasq/measures/) does not score ideal answers; the
organizers run ROUGE-1.5.5 with settings not published beside it. This follows that script's
definitions with rouge-score's tokenizer; the keys say ``_approx`` so nobody mistakes them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable

ROUGE_KEYS = (
    "rouge2_recall_approx",
    "rouge2_f1_approx",
    "rougesu4_recall_approx",
    "rougesu4_f1_approx",
)


def _left_sum(values: Iterable[float]) -> float:
    out = 0.0
    for v in values:
        out += v
    return out


def _bigrams(tokens: list[str]) -> Counter:
    return Counter(itertools.pairwise(tokens))


def _su4(tokens: list[str]) -> Counter:
    # ROUGE-1.5.5 "-2 4 -u": skip-bigrams with at most 4 tokens between, plus unigrams.
    grams: Counter = Counter(tokens)
    for i, first in enumerate(tokens):
        grams.update((first, second) for second in tokens[i + 1 : i + 6])
    return grams


def _pooled(peer: Counter, refs: list[Counter]) -> tuple[float, float]:
    """Return recall and F1 with hits and counts summed over references (ROUGE-1.5.5 "-f A")."""
    hits = sum(sum((peer & ref).values()) for ref in refs)
    ref_total = sum(sum(ref.values()) for ref in refs)
    peer_total = sum(peer.values()) * len(refs)
    recall = hits / ref_total if ref_total else 0.0
    precision = hits / peer_total if peer_total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return recall, f1


def rouge(pairs: list[tuple[list[str], str]]) -> dict[str, float | None]:
    """Return mean ROUGE-2 and ROUGE-SU4 recall and F1 of (gold ideal answers, submitted) pairs.

    An approximation of the organizers' ROUGE-1.5.5 run, not checked against it: rouge-score's
    tokens (lower case, alphanumeric, Porter-stemmed), every gold answer a reference, no
    jackknifing. None when rouge-score is not installed or there are no pairs.
    """
    try:
        from rouge_score.tokenizers import DefaultTokenizer
    except ImportError:
        return dict.fromkeys(ROUGE_KEYS)
    if not pairs:
        return dict.fromkeys(ROUGE_KEYS)
    tokenize = DefaultTokenizer(use_stemmer=True).tokenize
    scores = []
    for refs, peer in pairs:
        ref_tokens, peer_tokens = [tokenize(t) for t in refs], tokenize(peer)
        r2 = _pooled(_bigrams(peer_tokens), [_bigrams(t) for t in ref_tokens])
        su4 = _pooled(_su4(peer_tokens), [_su4(t) for t in ref_tokens])
        scores.append((*r2, *su4))
    return {key: _left_sum(s[i] for s in scores) / len(scores) for i, key in enumerate(ROUGE_KEYS)}
