"""Mixture-of-Intervention (MoI): passage utilities and position bias from several orders."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from infra.models import ChatModel, LikelihoodUnavailable
from nodes.context import Context
from nodes.ensemble.strategies.registry import (
    Plan,
    Strategy,
    StrategyUnavailable,
    View,
    register,
)
from nodes.evidence import passages


def moi_permutations(
    n: int, scheme: str, *, prefix_length: int = 3, seed: int = 0
) -> list[list[int]]:
    """Return the passage orderings MoI scores, one forward pass each.

    Schemes: "cyclic", the n cyclic shifts of range(n), shift 0 first; "prefix", the same
    shifts truncated to their first `prefix_length` passages (clipped to n), so each pass
    sees fewer passages; "random", 3n distinct seeded permutations (all n! of them, in
    lexicographic order, when n! < 3n).

    Raises:
        ValueError: On an unknown scheme, n < 1 or prefix_length < 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    shifts = [[(start + j) % n for j in range(n)] for start in range(n)]
    if scheme == "cyclic":
        return shifts
    if scheme == "prefix":
        if prefix_length < 1:
            raise ValueError(f"prefix_length must be >= 1, got {prefix_length}")
        return [shift[: min(prefix_length, n)] for shift in shifts]
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
    raise ValueError(f"unknown scheme {scheme!r}; expected 'cyclic', 'prefix' or 'random'")


@dataclass(frozen=True, eq=False)
class MoIFit:
    """Position weights and debiased passage utilities fitted by `moi_solve`."""

    weights: np.ndarray
    """a: one weight per position, non-negative, summing to 1."""
    utilities: np.ndarray
    """u: one debiased utility per passage."""
    residual: float
    """Final sum of squared errors of the observations (without the ridge penalty)."""

    def order(self) -> list[int]:
        """Return passages reordered so higher utility sits at higher-weight positions.

        Positions beyond len(weights) take the remaining passages in descending utility.
        Ties go to the lower position and the lower passage index.
        """
        by_utility = sorted(range(len(self.utilities)), key=lambda k: (-self.utilities[k], k))
        by_weight = sorted(range(len(self.weights)), key=lambda j: (-self.weights[j], j))
        placed: list[int] = [0] * len(self.weights)
        for position, passage in zip(by_weight, by_utility, strict=False):
            placed[position] = passage
        return placed + by_utility[len(self.weights) :]


def _one_hot(perms: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """Return E with E[i, j, k] = 1 when ordering i shows passage k at position j."""
    length = max(len(p) for p in perms)
    onehot = np.zeros((len(perms), length, n))
    for i, perm in enumerate(perms):
        onehot[i, np.arange(len(perm)), perm] = 1.0
    return onehot


def _fit_utilities(
    onehot: np.ndarray, weights: np.ndarray, obs: np.ndarray, prior: np.ndarray, ridge: float
) -> np.ndarray:
    """Return u minimizing ‖A u − s‖² + ridge‖u − prior‖² for fixed weights (A = E·a)."""
    design = np.einsum("mln,l->mn", onehot, weights)
    if ridge > 0:
        root = math.sqrt(ridge)
        design = np.vstack([design, root * np.eye(len(prior))])
        obs = np.concatenate([obs, root * prior])
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
    onehot: np.ndarray,
    weights: np.ndarray,
    utilities: np.ndarray,
    obs: np.ndarray,
    prior: np.ndarray,
    ridge: float,
) -> np.ndarray:
    """Polish (a, u) together with SLSQP; return the new weights."""
    length = len(weights)

    def loss(x: np.ndarray) -> tuple[float, np.ndarray]:
        a, u = x[:length], x[length:]
        shown = onehot @ u
        r = shown @ a - obs
        gap = u - prior
        grad_a = 2.0 * shown.T @ r
        grad_u = 2.0 * np.einsum("mln,l->mn", onehot, a).T @ r + 2.0 * ridge * gap
        return float(r @ r + ridge * gap @ gap), np.concatenate([grad_a, grad_u])

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


def _validate(
    perms: Sequence[Sequence[int]],
    observations: Sequence[float],
    n: int,
    prior: Sequence[float] | None,
    ridge: float,
) -> None:
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
    if prior is not None and len(prior) != n:
        raise ValueError(f"prior has {len(prior)} values, expected n={n}")
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")


def moi_solve(
    perms: Sequence[Sequence[int]],
    observations: Sequence[float],
    n: int,
    *,
    prior: Sequence[float] | None = None,
    ridge: float = 0.0,
    seed: int = 0,
) -> MoIFit:
    """Fit position weights a and passage utilities u to one observation per ordering.

    Solves min Σ_i (Σ_j a_j u_{π_i[j]} − s_i)² + ridge·‖u − prior‖² subject to Σ_j a_j = 1
    and 0 <= a_j <= 1: alternating least squares (u in closed form, a by SLSQP) then a joint
    SLSQP polish, from a few seeded starts, keeping the lowest objective. The problem is
    solved on standardized observations, which is exact: shifting s shifts u (Σa = 1) and
    scaling s scales u.

    The cyclic scheme gives n equations for 2n − 1 unknowns, so without a prior it is
    under-determined: many (a, u) fit exactly. MoI cuts the number of forward passes by
    passing the retriever's scores as `prior` with a small `ridge`, which pins u near what
    retrieval already knows and leaves the few observations to fit the position bias.

    NOTE: even with many orderings, full-length ones never fix the spread of the fit:
    a' = ā + t(a − ā) and u' = ū + (u − ū)/t (ā = 1/len(a), ū = mean u) predict the same
    observations for every t ≠ 0 the bounds allow, including t < 0, which reverses both
    rankings. `MoIFit.order` pairs ranks, so it is the same for every t; the magnitudes of
    a and u, and which passages are better, need a prior (any ridge > 0 picks the t whose
    u' lies closest to it) or truncated orderings ("prefix"), which break the symmetry.

    With ridge > 0 and no prior, u shrinks toward 0. A passage shown in no ordering gets
    its prior (with ridge > 0) or the mean observation (without).

    Args:
        perms: Orderings of passage indices in 0..n-1, one per observation; shorter
            orderings (pruned prefixes) leave later positions empty.
        observations: One score per ordering, e.g. log p(question | passages in that order).
        n: Number of passages.
        prior: Expected utility per passage (e.g. retriever scores on the observation scale).
        ridge: Weight of the pull toward the prior (>= 0).
        seed: Seed for the random starts.

    Raises:
        ValueError: On mismatched lengths, out-of-range or repeated indices, or bad values.
    """
    _validate(perms, observations, n, prior, ridge)
    obs = np.asarray(observations, dtype=float)
    anchor = np.asarray(prior, dtype=float) if prior is not None else np.zeros(n)
    onehot = _one_hot(perms, n)
    length = onehot.shape[1]
    center, scale = float(obs.mean()), float(obs.std())
    if scale == 0.0:
        scale = 1.0
    z_obs, z_prior = (obs - center) / scale, (anchor - center) / scale

    def objective(weights: np.ndarray, utilities: np.ndarray) -> float:
        r = (onehot @ utilities) @ weights - z_obs
        return float(r @ r + ridge * np.sum((utilities - z_prior) ** 2))

    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for weights in _starts(length, seed):
        utilities = _fit_utilities(onehot, weights, z_obs, z_prior, ridge)
        for _ in range(20):
            weights = _fit_weights(onehot, utilities, z_obs, weights)
            utilities = _fit_utilities(onehot, weights, z_obs, z_prior, ridge)
        weights = _fit_jointly(onehot, weights, utilities, z_obs, z_prior, ridge)
        utilities = _fit_utilities(onehot, weights, z_obs, z_prior, ridge)
        value = objective(weights, utilities)
        if best is None or value < best[0]:
            best = (value, weights, utilities)
    assert best is not None
    _, weights, z_utilities = best
    utilities = z_utilities * scale + center
    errors = (onehot @ utilities) @ weights - obs
    weights.setflags(write=False)
    utilities.setflags(write=False)
    return MoIFit(weights=weights, utilities=utilities, residual=float(errors @ errors))


@register("moi")
class MoI(Strategy):
    """Each model's likelihoods under several orders debias the order; one answer per model."""

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[dict[str, Any]],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Observe the question's likelihood under each order; answer in the debiased order."""
        settings = ctx.settings.ensemble
        top = contexts[: settings.contexts]
        perms = moi_permutations(
            len(top),
            settings.moi.permutations,
            prefix_length=settings.moi.prefix_length,
            seed=seed % 2**32,
        )
        scores = np.array([float(c.get("score") or 0.0) for c in top])
        calls: list[dict[str, Any]] = []
        fits: dict[str, Any] = {}
        views: list[View] = []

        async def observe(model: ChatModel) -> list[float]:
            return list(
                await asyncio.gather(
                    *(_observe(model, question, [top[i] for i in perm], calls) for perm in perms)
                )
            )

        try:
            observed = await asyncio.gather(*(observe(model) for model in models))
        except LikelihoodUnavailable as exc:
            raise StrategyUnavailable(f"ensemble strategy 'moi': {exc}") from None
        for number, (model, observations) in enumerate(zip(models, observed, strict=True)):
            obs = np.array(observations)
            spread = float(obs.std()) or 1.0
            z = (scores - scores.mean()) / (scores.std() or 1.0)
            prior = obs.mean() + z * spread  # the retriever's ranking, in the likelihoods' units
            fit = moi_solve(perms, obs, len(top), prior=prior, ridge=settings.moi.ridge, seed=seed)
            order = fit.order()
            views.append(View(model, number, order, 0.0))
            fits[f"{number}:{model.name}"] = {
                "observations": [round(float(o), 3) for o in obs],
                "permutations": [[top[i]["pmid"] for i in p] for p in perms],
                "position_weights": [round(float(a), 4) for a in fit.weights],
                "utilities": {
                    top[i]["pmid"]: round(float(u), 4) for i, u in enumerate(fit.utilities)
                },
                "order": [top[i]["pmid"] for i in order],
                "residual": round(float(fit.residual), 6),
            }
        return Plan(views, top, calls=calls, diagnostics={"moi": fits})


async def _observe(
    model: ChatModel, question: str, docs: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> float:
    context = passages(docs, model.context_chars) + "\n\nQuestion: "
    started, wall = time.perf_counter(), time.time()
    value, tokens = await model.loglikelihood(context, question)
    calls.append(
        {
            "node": "ensemble",
            "kind": "loglikelihood",
            "model": model.name,
            "started": round(wall, 4),
            "latency_s": round(time.perf_counter() - started, 3),
            "input_tokens": tokens,
            "output_tokens": 0,
            "raw": "",
            "error": None,
        }
    )
    return value
