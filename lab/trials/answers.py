"""How an answer is scored against gold: SQuAD's normalization, exact match, token F1.

One definition each, for every evaluation that needs it (`eval ensemble`, `eval methods`' datasets).
How sure a score or a comparison of two is: `infra/stats.py`.
"""

from __future__ import annotations

import re
import string
from collections import Counter


def normalize(text: str) -> str:
    """Lower-case, drop punctuation, the articles a/an/the and extra spaces (SQuAD's rule)."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match(prediction: str, golds: list[str]) -> float:
    """Return 1.0 when the prediction equals a gold answer after normalization."""
    p = normalize(prediction)
    return float(bool(p) and any(p == normalize(g) for g in golds))


def substring_match(prediction: str, golds: list[str]) -> float:
    """Return 1.0 when a gold answer is contained in the prediction after normalization."""
    p = normalize(prediction)
    return float(any((g := normalize(gold)) and g in p for gold in golds))


def token_f1(prediction: str, golds: list[str]) -> float:
    """Return SQuAD's token F1 against the best-matching gold answer."""
    mine = normalize(prediction).split()
    best = 0.0
    for gold in golds:
        theirs = normalize(gold).split()
        same = sum((Counter(mine) & Counter(theirs)).values())
        if same:
            precision, recall = same / len(mine), same / len(theirs)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def wrong_concentration(answers: list[str], right: list[bool]) -> float | None:
    """Return the share of wrong answers that are the most common wrong answer (None: none wrong).

    CoBag's diagnostic: near 1.0, the members err together (a shared bias voting cannot fix).
    """
    wrong = Counter(normalize(a) for a, ok in zip(answers, right, strict=True) if not ok)
    total = sum(wrong.values())
    return wrong.most_common(1)[0][1] / total if total else None
