"""The three fits of `quorum eval likelihoods` each win on the scores they describe, and only there.

Synthetic scores over orders of passages, 20 questions each, held-out orders judged by R²:
the gold's position alone, the passages shown alone, and MoI's position × utility product.
"""

from __future__ import annotations

import numpy as np
import pytest

from lab.trials.likelihood_fits import (
    MODELS,
    best,
    fit_all,
    fit_position,
    fit_utility,
    judge,
    r_squared,
    summarize,
)
from nodes.ensemble.strategies.moi import moi_permutations

N = 5
GOLD = 2
QUESTIONS = 20
NOISE = 0.05


def full_orders(seed: int, count: int) -> tuple[list[list[int]], list[list[int]]]:
    """Return MoI's 3N random fitting orders and `count` other full orders to judge on."""
    train = moi_permutations(N, "random", seed=seed)
    seen = {tuple(p) for p in train}
    rng = np.random.default_rng(seed + 1000)
    test: list[list[int]] = []
    while len(test) < count:
        perm = rng.permutation(N).tolist()
        if tuple(perm) not in seen:
            seen.add(tuple(perm))
            test.append(perm)
    return train, test


def subset_orders(rng: np.random.Generator, n: int, length: int, count: int) -> list[list[int]]:
    """Return `count` random orders of `length` passages out of n (shown sets differ)."""
    return [rng.permutation(n)[:length].tolist() for _ in range(count)]


def summary_of(scorer, orders_for, n: int = N, noise: float = NOISE) -> dict:
    judged = []
    for q in range(QUESTIONS):
        rng = np.random.default_rng(q)
        train, test = orders_for(q, rng)
        score = scorer(rng)
        train_scores = [score(o) + rng.normal(0, noise) for o in train]
        test_scores = [score(o) + rng.normal(0, noise) for o in test]
        judged.append(judge(train, train_scores, test, test_scores, n, GOLD, seed=q))
    return summarize(judged)


def assert_wins(summary: dict, winner: str, margin: float) -> None:
    assert best(summary) == best(summary, "r2_median") == winner
    top = summary[winner]["r2_pooled"]
    assert top > 0.8
    for other in MODELS:
        if other != winner:
            assert summary[other]["r2_pooled"] < top - margin, (other, summary)


def test_scores_set_by_the_gold_position_alone_are_position_only():
    def scorer(rng):
        curve = rng.normal(0, 1, N)
        return lambda order: curve[order.index(GOLD)]

    summary = summary_of(scorer, lambda q, rng: full_orders(q, 2 * N))
    # MoI's model holds this one (u: gold vs rest) but pays for its extra parameters on
    # 3N orders; utility-only sees no difference between full orders at all.
    assert_wins(summary, "position_only", margin=0.02)
    assert summary["utility_only"]["r2_pooled"] <= 0.0


def test_scores_set_by_the_passages_shown_alone_are_utility_only():
    n = 8

    def scorer(rng):
        utilities = rng.normal(0, 1, n)
        utilities[GOLD] = 0.0  # the gold passage is no likelier than any other
        return lambda order: float(np.mean(utilities[order]))

    summary = summary_of(
        scorer,
        lambda q, rng: (subset_orders(rng, n, 3, 3 * n), subset_orders(rng, n, 3, 16)),
        n,
        0.15,
    )
    # MoI's model holds this one too (flat weights) but pays for its extra parameters.
    assert_wins(summary, "utility_only", margin=0.01)


def test_scores_of_position_times_utility_are_moi():
    weights = np.array([0.45, 0.25, 0.1, 0.08, 0.12])

    def scorer(rng):
        utilities = rng.normal(0, 3, N)
        return lambda order: float(weights @ utilities[order])

    summary = summary_of(scorer, lambda q, rng: full_orders(q, 2 * N))
    assert_wins(summary, "moi", margin=0.2)
    assert summary["utility_only"]["r2_pooled"] <= 0.0


def test_utility_only_over_full_orders_is_the_mean():
    train, test = full_orders(0, 4)
    scores = np.arange(len(train), dtype=float)
    predicted = fit_utility(train, scores, N).predict(test)
    assert np.allclose(predicted, scores.mean())


def test_position_only_is_the_mean_at_each_gold_position_and_absent_is_its_own():
    orders = [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 1, 3], [2, 3, 0]]
    scores = [1.0, 5.0, 3.0, -1.0, 7.0]
    fitted = fit_position(orders, scores, gold=2)
    assert fitted.predict([[3, 1, 2], [2, 1, 0], [0, 1, 3], [3, 2, 1]]).tolist() == [
        1.0,
        6.0,
        -1.0,
        3.0,
    ]


def test_moi_recovers_exact_products():
    weights = np.array([0.5, 0.3, 0.2])
    utilities = np.array([2.0, -1.0, 0.5])
    orders = [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1], [2, 1, 0], [1, 0, 2]]
    scores = [float(weights @ utilities[o]) for o in orders]
    fitted = fit_all(orders, scores, 3, gold=0)
    assert np.allclose(fitted["moi"].predict(orders), scores, atol=1e-6)


def test_r_squared():
    assert r_squared([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert r_squared([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == 0.0
    assert r_squared([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-3.0)
    assert np.isnan(r_squared([2.0, 2.0], [1.0, 3.0]))
