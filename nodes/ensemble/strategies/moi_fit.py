"""Mixture-of-Intervention's fit: position weights and passage utilities, and its orientation.

mixture-of-intervention.txt §3.1: each order π_i of the passages gives an observation s_i
(Eq. 3); s_i ≈ Σ_j a_j · u_{π_i[j]} (Eq. 4) with position weights a on the simplex and one
debiased utility u per passage, fitted by least squares under Σ a = 1, 0 <= a <= 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class MoIFit:
    """Position weights and debiased passage utilities fitted by `moi_solve`."""

    weights: np.ndarray
    """a: one weight per position, non-negative, summing to 1."""
    utilities: np.ndarray
    """u: one debiased utility per passage."""
    residual: float
    """Final sum of squared errors of the observations."""

    def order(self, how: str = "paired") -> list[int]:
        """Return the passages in the order the generator reads them next.

        "paired": the k-th most useful passage at the k-th most read position, which is the
        order the fitted model scores highest (Σ_j a_j u_π(j) is largest when the two rank
        alike: the rearrangement inequality); positions beyond len(weights) take the
        remaining passages by utility. "descending": most
        useful first, the paper's literal rule (§3.1), which is the same order whenever the
        weights fall with position, as the paper's Figure 6 finds for every model it tried.
        Pairing also holds under recency or a U curve, and does not depend on the fit's
        orientation (see `flipped`). Ties go to the lower position and passage index.

        Measured on the planted reader (60 questions of 6 passages: gold, two hard
        distractors, three irrelevant, shuffled; expected accuracy = the gold passage's
        weight share in the order read): u curve single 0.39, paired 0.51, descending 0.62;
        primacy 0.36, 0.47, 0.47; recency 0.40, 0.47, 0.21. That reader is quorum's own
        simulator, so the default (moi.order) is the paper's descending; paired is kept
        for readers with a recency lean.
        """
        by_utility = sorted(range(len(self.utilities)), key=lambda k: (-self.utilities[k], k))
        if how == "descending":
            return by_utility
        by_weight = sorted(range(len(self.weights)), key=lambda j: (-self.weights[j], j))
        placed: list[int] = [0] * len(self.weights)
        for position, passage in zip(by_weight, by_utility, strict=False):
            placed[position] = passage
        return placed + by_utility[len(self.weights) :]

    def flipped(self) -> MoIFit:
        """Return the mirror fit that predicts every full-length ordering the same.

        a' = ā − t(a − ā), u' = ū − (u − ū)/t, with the largest t in (0, 1] that keeps a' in
        [0, 1]: both rankings reverse, the predictions of full orderings do not change.
        """
        a, u = self.weights, self.utilities
        mean_a, mean_u = 1.0 / len(a), float(u.mean())
        gap = a - mean_a
        bounds = [1.0]
        bounds += [mean_a / g for g in gap if g > 1e-12]
        bounds += [(1.0 - mean_a) / -g for g in gap if g < -1e-12]
        t = min(bounds)
        weights = _on_simplex(mean_a - t * gap)
        utilities = mean_u - (u - mean_u) / t
        weights.setflags(write=False)
        utilities.setflags(write=False)
        return MoIFit(weights=weights, utilities=utilities, residual=self.residual)


def orient(
    fit: MoIFit, perms: Sequence[Sequence[int]], n: int, prior: Sequence[float] | None
) -> tuple[MoIFit, str]:
    """Return the fit turned the way the evidence says, and what said so.

    Full-length orderings fix (a, u) only up to a mirror (`flipped`): the data cannot tell a
    primacy bias with good passages from a recency bias with bad ones. The paper leans on
    the retriever's prior (§3.2-3.3), so: prefix orderings decide it themselves (a passage
    left out contributes nothing, which breaks the mirror); otherwise the side whose
    utilities rank with the retriever's scores wins; with scores that say nothing (all
    equal), the side whose weights fall with position (the paper's Figure 6).
    """
    if any(len(p) < n for p in perms):
        return fit, "prefix orders (the data fix it)"
    if np.ptp(fit.weights) < 1e-9 or np.ptp(fit.utilities) < 1e-12:
        return fit, "no position bias to orient"
    if prior is not None and np.ptp(np.asarray(prior, dtype=float)) > 0:
        rho = _rank_correlation(fit.utilities, prior)
        if rho != 0.0:
            return (fit if rho > 0 else fit.flipped()), "retriever prior"
    rho = _rank_correlation(fit.weights, -np.arange(len(fit.weights)))
    return (fit if rho >= 0 else fit.flipped()), "primacy (paper's Figure 6; no prior)"


def _minimize() -> Any:
    # NOTE: scipy.optimize on first use: importing it costs a second, which every command
    # that builds the graph (`trace list`) would pay for a strategy it never runs.
    from scipy.optimize import minimize

    return minimize


def _rank_correlation(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import spearmanr  # on first use: scipy costs a second to import

    rho = spearmanr(x, y).statistic
    return 0.0 if rho is None or not np.isfinite(rho) else float(rho)


def one_hot(perms: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """Return E with E[i, j, k] = 1 when ordering i shows passage k at position j."""
    length = max(len(p) for p in perms)
    onehot = np.zeros((len(perms), length, n))
    for i, perm in enumerate(perms):
        onehot[i, np.arange(len(perm)), perm] = 1.0
    return onehot


def fit_utilities(onehot: np.ndarray, weights: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """Return u minimizing ‖A u − s‖² for fixed weights (A = E·a); minimum norm if not unique."""
    design = np.einsum("mln,l->mn", onehot, weights)
    return np.linalg.lstsq(design, obs, rcond=None)[0]


def _on_simplex(weights: np.ndarray) -> np.ndarray:
    """Clip solver round-off so the weights lie in [0, 1] and sum to 1 exactly."""
    clipped = np.clip(weights, 0.0, 1.0)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(len(weights), 1.0 / len(weights))


def _simplex_constraints(length: int) -> dict[str, Any]:
    return {
        "type": "eq",
        "fun": lambda x: np.sum(x[:length]) - 1.0,
        "jac": lambda x: np.concatenate([np.ones(length), np.zeros(len(x) - length)]),
    }


def _fit_weights(
    onehot: np.ndarray, utilities: np.ndarray, obs: np.ndarray, start: np.ndarray
) -> np.ndarray:
    """Return a on the simplex minimizing ‖U a − s‖² for fixed utilities (U = E·u)."""
    shown = onehot @ utilities

    def loss(a: np.ndarray) -> tuple[float, np.ndarray]:
        r = shown @ a - obs
        return float(r @ r), 2.0 * shown.T @ r

    result = _minimize()(
        loss,
        start,
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * len(start),
        constraints=[_simplex_constraints(len(start))],
        options={"ftol": 1e-14, "maxiter": 200},
    )
    return _on_simplex(result.x)


def _fit_jointly(
    onehot: np.ndarray, weights: np.ndarray, utilities: np.ndarray, obs: np.ndarray
) -> np.ndarray:
    """Polish (a, u) together with SLSQP; return the new weights."""
    length = len(weights)

    def loss(x: np.ndarray) -> tuple[float, np.ndarray]:
        a, u = x[:length], x[length:]
        shown = onehot @ u
        r = shown @ a - obs
        grad_a = 2.0 * shown.T @ r
        grad_u = 2.0 * np.einsum("mln,l->mn", onehot, a).T @ r
        return float(r @ r), np.concatenate([grad_a, grad_u])

    result = _minimize()(
        loss,
        np.concatenate([weights, utilities]),
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * length + [(None, None)] * len(utilities),
        constraints=[_simplex_constraints(length)],
        options={"ftol": 1e-15, "maxiter": 500},
    )
    return _on_simplex(result.x[:length])


def _starts(length: int, seed: int, random_starts: int = 3) -> list[np.ndarray]:
    decreasing = 1.0 / np.arange(1, length + 1)
    rng = np.random.default_rng(seed)
    return [
        np.full(length, 1.0 / length),
        decreasing / decreasing.sum(),
        *(rng.dirichlet(np.ones(length)) for _ in range(random_starts)),
    ]


def _validate(perms: Sequence[Sequence[int]], observations: Sequence[float], n: int) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not perms:
        raise ValueError("need at least one permutation")
    if len(perms) != len(observations):
        raise ValueError(f"{len(perms)} permutations but {len(observations)} observations")
    for perm in perms:
        if not perm or len(set(perm)) != len(perm):
            raise ValueError(f"permutation {list(perm)} is empty or repeats a passage")
        if any(not 0 <= k < n for k in perm):
            raise ValueError(f"permutation {list(perm)} has an index outside 0..{n - 1}")
    if not np.all(np.isfinite(np.asarray(observations, dtype=float))):
        raise ValueError("observations must be finite")


def moi_solve(
    perms: Sequence[Sequence[int]], observations: Sequence[float], n: int, *, seed: int = 0
) -> MoIFit:
    """Fit position weights a and passage utilities u to one observation per ordering.

    Solves the paper's program min Σ_i (Σ_j a_j u_{π_i[j]} − s_i)² subject to Σ_j a_j = 1
    and 0 <= a_j <= 1 (§3.1): alternating least squares (u in closed form, a by SLSQP), then
    a joint SLSQP polish, from a few seeded starts, keeping the lowest residual. It works on
    standardized observations, which is exact: shifting s shifts u (Σa = 1), scaling s
    scales u. Nothing pulls u toward the retriever's scores (the paper has no such term).

    NOTE: full-length orderings fix (a, u) only up to a' = ā + t(a − ā), u' = ū + (u − ū)/t
    for every t ≠ 0 the bounds allow, t < 0 reversing both rankings (`MoIFit.flipped`);
    `orient` picks the side. The cyclic scheme's n equations for 2n − 1 unknowns leave more
    open still; the minimum-norm u is taken. A passage shown in no ordering gets the mean
    observation.

    Args:
        perms: Orderings of passage indices in 0..n-1, one per observation; shorter
            orderings (pruned prefixes) leave later positions empty.
        observations: One score per ordering, e.g. log P(passages in that order, question).
        n: Number of passages.
        seed: Seed for the random starts.

    Raises:
        ValueError: On mismatched lengths, out-of-range or repeated indices, or bad values.
    """
    _validate(perms, observations, n)
    obs = np.asarray(observations, dtype=float)
    onehot = one_hot(perms, n)
    length = onehot.shape[1]
    center, scale = float(obs.mean()), float(obs.std())
    if scale == 0.0:
        scale = 1.0
    z_obs = (obs - center) / scale

    def objective(weights: np.ndarray, utilities: np.ndarray) -> float:
        r = (onehot @ utilities) @ weights - z_obs
        return float(r @ r)

    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for weights in _starts(length, seed):
        utilities = fit_utilities(onehot, weights, z_obs)
        for _ in range(20):
            weights = _fit_weights(onehot, utilities, z_obs, weights)
            utilities = fit_utilities(onehot, weights, z_obs)
        weights = _fit_jointly(onehot, weights, utilities, z_obs)
        utilities = fit_utilities(onehot, weights, z_obs)
        value = objective(weights, utilities)
        if best is None or value < best[0] - 1e-12:
            best = (value, weights, utilities)
    assert best is not None
    _, weights, z_utilities = best
    shown = onehot.sum(axis=(0, 1)) > 0
    z_utilities = np.where(shown, z_utilities, 0.0)  # never shown: the mean observation
    utilities = z_utilities * scale + center
    errors = (onehot @ utilities) @ weights - obs
    weights.setflags(write=False)
    utilities.setflags(write=False)
    return MoIFit(weights=weights, utilities=utilities, residual=float(errors @ errors))


def moi_flat(perms: Sequence[Sequence[int]], observations: Sequence[float], n: int) -> MoIFit:
    """Return MoI's control: every position weighs 1/L, utilities are plain mean likelihoods.

    With the position weights no longer fitted (Eq. 4 with a_j = 1/L) nothing separates a
    passage's utility from where it stood, so each passage's utility is the mean observation
    of the orders that show it. Over full orders every passage is in every order, so the
    utilities tie and the descending order falls back to the rank order: what MoI's
    debiasing adds is exactly what this control lacks (mixture-of-intervention.txt §3.1).
    Same orders, same observations: the control costs what the method costs.
    """
    _validate(perms, observations, n)
    obs = np.asarray(observations, dtype=float)
    onehot = one_hot(perms, n)
    length = onehot.shape[1]
    weights = np.full(length, 1.0 / length)
    shows = onehot.sum(axis=1) > 0  # shows[i, k]: order i shows passage k
    # One mean per passage over its own orders (not a matrix product), so passages shown in
    # the same orders tie exactly and the order falls back to the rank order.
    mean = float(obs.mean())
    utilities = np.array(
        [float(obs[shows[:, k]].mean()) if shows[:, k].any() else mean for k in range(n)]
    )
    errors = (onehot @ utilities) @ weights - obs
    weights.setflags(write=False)
    utilities.setflags(write=False)
    return MoIFit(weights=weights, utilities=utilities, residual=float(errors @ errors))
