"""Mixture-of-Intervention's arithmetic: the orders observed, the fit, and its orientation.

mixture-of-intervention.txt §3.1: each order π_i of the passages gives an observation s_i
(Eq. 3); s_i ≈ Σ_j a_j · u_{π_i[j]} (Eq. 4) with position weights a on the simplex and one
debiased utility u per passage, fitted by least squares under Σ a = 1, 0 <= a <= 1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.stats import spearmanr

SCHEMES = ("random", "cyclic", "prefix", "variable")


def moi_permutations(
    n: int,
    scheme: str,
    *,
    prefix_length: int = 3,
    seed: int = 0,
    scores: Sequence[float] | None = None,
) -> list[list[int]]:
    """Return the passage orderings MoI scores, one forward pass each.

    Schemes: "random", 3n distinct seeded permutations (§3.2.1; all n! of them, in
    lexicographic order, when n! < 3n); "cyclic", the n cyclic shifts of the rank order,
    shift 0 first (§3.2.2); "prefix", those shifts cut to their first `prefix_length`
    passages (§3.3.1, Eq. 5-6); "variable", each shift cut where its prefix holds as much of
    the retriever's score mass as `prefix_length` average passages (`variable_lengths`).

    Raises:
        ValueError: On an unknown scheme, n < 1, prefix_length < 1, or "variable" without
            one score per passage.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if prefix_length < 1:
        raise ValueError(f"prefix_length must be >= 1, got {prefix_length}")
    shifts = [[(start + j) % n for j in range(n)] for start in range(n)]
    if scheme == "cyclic":
        return shifts
    if scheme == "prefix":
        return [shift[: min(prefix_length, n)] for shift in shifts]
    if scheme == "variable":
        if scores is None or len(scores) != n:
            raise ValueError("the 'variable' scheme needs one retriever score per passage")
        lengths = variable_lengths(scores, prefix_length)
        return [shift[:length] for shift, length in zip(shifts, lengths, strict=True)]
    if scheme == "random":
        wanted = 3 * n
        if n < 5 and math.factorial(n) < wanted:  # 4! = 24 >= 12, so only n <= 3 enumerate
            return [list(p) for p in itertools.permutations(range(n))]
        rng = np.random.default_rng(seed)
        perms: list[list[int]] = []
        seen: set[tuple[int, ...]] = set()
        while len(perms) < wanted:
            perm = tuple(rng.permutation(n).tolist())
            if perm not in seen:
                seen.add(perm)
                perms.append(list(perm))
        return perms
    raise ValueError(f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")


def variable_lengths(scores: Sequence[float], prefix_length: int) -> list[int]:
    """Return each cyclic shift's prefix length under variable pruning.

    The paper prunes with the retriever's scores without giving a formula (§4.3, Table 6);
    this is our reading: scores are min-max scaled to [0, 1], and the shift starting at
    passage k keeps the shortest prefix whose scaled scores sum to `prefix_length` times
    their mean, so a shift opening on strong passages is cut early and one opening on weak
    passages reads on until it reaches strong ones. Equal scores give `prefix_length` each.
    """
    values = np.asarray(scores, dtype=float)
    n = len(values)
    spread = float(values.max() - values.min()) if n else 0.0
    scaled = (values - values.min()) / spread if spread > 0 else np.ones(n)
    target = min(prefix_length, n) * float(scaled.mean())
    lengths = []
    for start in range(n):
        held, length = 0.0, 0
        while length < n and (length == 0 or held < target - 1e-9):
            held += float(scaled[(start + length) % n])
            length += 1
        lengths.append(length)
    return lengths


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
        primacy 0.36, 0.47, 0.47; recency 0.40, 0.47, 0.21. Descending gains most under a U
        but falls far below single under recency; paired beats single under all three, so
        it is the default (moi.order).
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


def _rank_correlation(x: Sequence[float], y: Sequence[float]) -> float:
    rho = spearmanr(x, y).statistic
    return 0.0 if rho is None or not np.isfinite(rho) else float(rho)


def _one_hot(perms: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """Return E with E[i, j, k] = 1 when ordering i shows passage k at position j."""
    length = max(len(p) for p in perms)
    onehot = np.zeros((len(perms), length, n))
    for i, perm in enumerate(perms):
        onehot[i, np.arange(len(perm)), perm] = 1.0
    return onehot


def _fit_utilities(onehot: np.ndarray, weights: np.ndarray, obs: np.ndarray) -> np.ndarray:
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

    result = minimize(
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

    result = minimize(
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
    onehot = _one_hot(perms, n)
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
        utilities = _fit_utilities(onehot, weights, z_obs)
        for _ in range(20):
            weights = _fit_weights(onehot, utilities, z_obs, weights)
            utilities = _fit_utilities(onehot, weights, z_obs)
        weights = _fit_jointly(onehot, weights, utilities, z_obs)
        utilities = _fit_utilities(onehot, weights, z_obs)
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
