"""Mixture-of-Intervention's interventions: the passage orders each model is scored on.

mixture-of-intervention.txt §3.2: 3N random orders (§3.2.1), the N cyclic shifts (§3.2.2),
and those shifts pruned to a prefix (§3.3.1); `moi_fit` fits one observation per order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

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
