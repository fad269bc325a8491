"""Three models of a score over passage orders, fitted on some orders and judged on others.

mixture-of-intervention.txt §3.1 (Eq. 4) models an order's score as s ≈ Σ_j a_j u_{π[j]}:
position weights a on the simplex times per-passage utilities u. Its two parts alone:

- utility-only: flat weights (a_j = 1/L), per-passage utilities by least squares. NOTE: over
  full-length orders every order shows the same passages, so this predicts one value (the
  mean) for every order; it says something only where orders show different passages.
- position-only: the score depends on where the gold passage sits and on nothing else (the
  other passages are interchangeable): one mean per gold position (Lost in the Middle's
  curve; "absent" is a position of its own for orders that leave the gold out).

Full-length orders leave MoI's model only its interaction term (Σ_j (a_j − 1/N)(u_{π[j]} − ū)
plus a constant), and position-only is nested in it; each is judged by R² on held-out orders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nodes.ensemble.strategies.moi_fit import fit_utilities, moi_solve, one_hot

MODELS = ("moi", "position_only", "utility_only")
"""The three models, in the order reports show them."""

Orders = Sequence[Sequence[int]]


@dataclass(frozen=True)
class Fitted:
    """One model fitted on training orders."""

    name: str
    parameters: int
    """Free parameters (the simplex constraint counted out)."""
    predict: Callable[[Orders], np.ndarray]
    """Predicted score of each order."""


def _weighted(weights: np.ndarray, utilities: np.ndarray) -> Callable[[Orders], np.ndarray]:
    def predict(orders: Orders) -> np.ndarray:
        return np.array(
            [sum(weights[j] * utilities[k] for j, k in enumerate(order)) for order in orders]
        )

    return predict


def fit_moi(orders: Orders, scores: Sequence[float], n: int, *, seed: int = 0) -> Fitted:
    """Fit MoI's position weights × utilities with `moi_solve` (Eq. 4, the paper's program)."""
    fit = moi_solve(orders, scores, n, seed=seed)
    return Fitted("moi", len(fit.weights) - 1 + n, _weighted(fit.weights, fit.utilities))


def fit_utility(orders: Orders, scores: Sequence[float], n: int) -> Fitted:
    """Fit per-passage utilities under flat position weights (moi_fit's least squares)."""
    onehot = one_hot(orders, n)
    length = onehot.shape[1]
    weights = np.full(length, 1.0 / length)
    utilities = fit_utilities(onehot, weights, np.asarray(scores, dtype=float))
    return Fitted("utility_only", n, _weighted(weights, utilities))


def gold_position(order: Sequence[int], gold: int) -> int:
    """Return where the gold passage stands in an order, -1 when the order leaves it out."""
    return list(order).index(gold) if gold in order else -1


def fit_position(orders: Orders, scores: Sequence[float], gold: int) -> Fitted:
    """Fit one mean score per gold position; a position never seen gets the overall mean."""
    values = np.asarray(scores, dtype=float)
    at = np.array([gold_position(order, gold) for order in orders])
    means = {int(p): float(values[at == p].mean()) for p in np.unique(at)}
    overall = float(values.mean())

    def predict(new: Orders) -> np.ndarray:
        return np.array([means.get(gold_position(order, gold), overall) for order in new])

    return Fitted("position_only", len(means), predict)


def fit_all(
    orders: Orders, scores: Sequence[float], n: int, gold: int, *, seed: int = 0
) -> dict[str, Fitted]:
    """Fit the three models on the same orders and scores."""
    return {
        "moi": fit_moi(orders, scores, n, seed=seed),
        "position_only": fit_position(orders, scores, gold),
        "utility_only": fit_utility(orders, scores, n),
    }


def squared_errors(observed: Sequence[float], predicted: Sequence[float]) -> tuple[float, float]:
    """Return (SSE, SST): squared errors, and squared deviations from the observed mean."""
    obs = np.asarray(observed, dtype=float)
    errors = obs - np.asarray(predicted, dtype=float)
    spread = obs - obs.mean()
    return float(errors @ errors), float(spread @ spread)


def r_squared(observed: Sequence[float], predicted: Sequence[float]) -> float:
    """Return 1 − SSE/SST on held-out scores (negative: worse than their own mean); NaN if flat."""
    sse, sst = squared_errors(observed, predicted)
    return 1.0 - sse / sst if sst > 0 else float("nan")


@dataclass(frozen=True)
class Judged:
    """The three models' held-out errors on one question."""

    sse: dict[str, float]
    sst: float
    train_sse: dict[str, float]
    """Errors on the fitting orders themselves: the gap to `sse` is what the fit overfits."""
    train_sst: float

    def r2(self, model: str) -> float:
        """Return this question's held-out R² for one model."""
        return 1.0 - self.sse[model] / self.sst if self.sst > 0 else float("nan")


def judge(
    train: Orders,
    train_scores: Sequence[float],
    test: Orders,
    test_scores: Sequence[float],
    n: int,
    gold: int,
    *,
    seed: int = 0,
) -> Judged:
    """Fit the three models on the training orders; return their errors on the held-out ones."""
    fitted = fit_all(train, train_scores, n, gold, seed=seed)
    sse: dict[str, float] = {}
    train_sse: dict[str, float] = {}
    sst = train_sst = 0.0
    for name, model in fitted.items():
        sse[name], sst = squared_errors(test_scores, model.predict(test))
        train_sse[name], train_sst = squared_errors(train_scores, model.predict(train))
    return Judged(sse, sst, train_sse, train_sst)


def summarize(judged: Sequence[Judged]) -> dict[str, dict[str, float | None]]:
    """Return each model's pooled and per-question held-out R² over questions.

    Pooled: 1 − ΣSSE/ΣSST with each question's SST around its own held-out mean, so the
    spread between questions (some questions are just likelier) counts for no model.
    `r2_fitting_pooled` is the same on the fitting orders (in-sample).
    """
    rows: dict[str, dict[str, float | None]] = {}
    sst = sum(j.sst for j in judged)
    train_sst = sum(j.train_sst for j in judged)
    for name in MODELS:
        per = np.array([j.r2(name) for j in judged], dtype=float)
        per = per[np.isfinite(per)]
        rows[name] = {
            "r2_pooled": _round(1.0 - sum(j.sse[name] for j in judged) / sst) if sst > 0 else None,
            "r2_mean": _round(float(per.mean())) if len(per) else None,
            "r2_median": _round(float(np.median(per))) if len(per) else None,
            "best_on": int(sum(1 for j in judged if _winner(j) == name)),
            "r2_fitting_pooled": _round(1.0 - sum(j.train_sse[name] for j in judged) / train_sst)
            if train_sst > 0
            else None,
        }
    return rows


def _winner(judged: Judged) -> str:
    return min(MODELS, key=lambda name: judged.sse[name])


def best(summary: dict[str, dict[str, float | None]], by: str = "r2_pooled") -> str:
    """Return the model with the highest figure `by` (r2_pooled, r2_median, best_on …)."""
    return max(MODELS, key=lambda name: _or_worst(summary[name][by]))


def _or_worst(value: float | None) -> float:
    return -np.inf if value is None else float(value)


def _round(value: float) -> float:
    return round(float(value), 4)
