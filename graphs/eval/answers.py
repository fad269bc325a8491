"""How an answer is scored against gold, and how sure a score or a comparison of two is.

One definition each, for every evaluation that needs it: `eval ensemble`, `eval methods` (its
datasets and accuracy intervals) and `bioasq report`'s paired comparison.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Any

from scipy.stats import binomtest


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


def mcnemar(reference: list[bool], other: list[bool], *, digits: int = 6) -> dict[str, Any]:
    """Exact McNemar test on paired correctness.

    b counts the questions only `other` got right, c those only `reference` got right; the
    p-value is the two-sided binomial test of b against b + c at one half, rounded to `digits`.
    """
    b = sum(o and not r for r, o in zip(reference, other, strict=True))
    c = sum(r and not o for r, o in zip(reference, other, strict=True))
    p = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
    return {"b": b, "c": c, "p_value": round(float(p), digits)}


def wilson(successes: int, n: int, z: float = 1.959964) -> list[float]:
    """Return the 95% Wilson score interval of a proportion ([0, 1] when n is 0)."""
    if n == 0:
        return [0.0, 1.0]
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]
