"""Context views: which passages each ensemble member sees, in which order."""

from __future__ import annotations

import math
import random


def permuted_views(n: int, k: int, m: int, seed: int) -> list[list[int]]:
    """Return k orders of the top-m of n passages: the rank order first, then distinct shuffles."""
    top = list(range(min(n, m)))
    rng = random.Random(seed)
    views, seen = [top], {tuple(top)}
    possible = math.factorial(len(top)) if len(top) < 8 else k
    attempts = 0
    while len(views) < min(k, possible) and attempts < 100 * k:
        attempts += 1
        order = top[:]
        rng.shuffle(order)
        if tuple(order) not in seen:
            seen.add(tuple(order))
            views.append(order)
    distinct = len(views)
    while len(views) < k:  # fewer distinct orders exist than members: cycle through them
        views.append(views[len(views) % distinct])
    return views
