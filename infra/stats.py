"""How sure a score is, and a comparison of two runs on the same questions.

McNemar's exact test, Wilson's interval and Newcombe's paired difference: one definition each
for `bioasq report` (two submissions compared) and the lab's evaluations (`eval methods`,
`eval ensemble`).
"""

from __future__ import annotations

import math
from typing import Any

from scipy.stats import binomtest


def mcnemar(reference: list[bool], other: list[bool], *, digits: int = 6) -> dict[str, Any]:
    """Exact McNemar test on paired correctness.

    b counts the questions only `other` got right, c those only `reference` got right; the
    p-value is the two-sided binomial test of b against b + c at one half, rounded to `digits`.
    """
    b = sum(o and not r for r, o in zip(reference, other, strict=True))
    c = sum(r and not o for r, o in zip(reference, other, strict=True))
    p = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
    return {"b": b, "c": c, "p_value": round(float(p), digits)}


Z95 = 1.959964
"""The normal quantile of a two-sided 95% interval."""


def wilson(successes: int, n: int, z: float = Z95) -> list[float]:
    """Return the 95% Wilson score interval of a proportion ([0, 1] when n is 0)."""
    return [round(bound, 4) for bound in _wilson(successes, n, z)]


def _wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired(method: list[bool], control: list[bool], *, digits: int = 4) -> dict[str, Any]:
    """Compare a method with its control on the same questions, answer by answer.

    method_only counts the questions only the method got right, control_only those only the
    control got right; p is McNemar's exact two-sided test (the binomial test of method_only
    against method_only + control_only at one half); diff_ci95 is the 95% interval of the paired
    accuracy difference method - control by Newcombe's method 10 (Newcombe 1998, Statistics in
    Medicine 17:2635, "Improved confidence intervals for the difference between binomial
    proportions based on paired data"): each accuracy's Wilson interval, combined with the
    correlation of the two answers (its numerator less n/2 when positive, Newcombe's
    correction). It stays inside [-1, 1] and is sensible at 0 or n discordant pairs, where
    Wald's is not.
    """
    n = len(method)
    both = sum(m and c for m, c in zip(method, control, strict=True))
    b = sum(m and not c for m, c in zip(method, control, strict=True))
    c = sum(c and not m for m, c in zip(method, control, strict=True))
    neither = n - both - b - c
    if n == 0:
        return {"method_only": 0, "control_only": 0, "p": 1.0, "diff_ci95": [-1.0, 1.0]}
    p = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
    p1, p2 = (both + b) / n, (both + c) / n
    (l1, u1), (l2, u2) = _wilson(both + b, n), _wilson(both + c, n)
    cross = both * neither - b * c
    if cross > 0:
        cross = max(cross - n / 2, 0.0)
    margins = (both + b) * (c + neither) * (both + c) * (b + neither)
    phi = cross / math.sqrt(margins) if margins else 0.0
    diff = p1 - p2
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return {
        "method_only": b,
        "control_only": c,
        "p": round(float(p), 6),
        "diff_ci95": [
            round(max(-1.0, diff - below), digits),
            round(min(1.0, diff + above), digits),
        ],
    }
