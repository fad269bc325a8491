"""Context views: which passages each ensemble member sees, in which order."""

from __future__ import annotations

import hashlib
import random


def view_seed(seed: int, question: str) -> int:
    """Return a per-question seed, so runs are reproducible and questions differ."""
    digest = hashlib.sha256(f"{seed}|{question}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def permuted_views(n: int, k: int, m: int, seed: int) -> list[list[int]]:
    """Return k orders of the top-m of n passages: the rank order first, then distinct shuffles."""
    top = list(range(min(n, m)))
    rng = random.Random(seed)
    views, seen = [top], {tuple(top)}
    attempts = 0
    while len(views) < k and attempts < 50 * k:
        attempts += 1
        order = top[:]
        rng.shuffle(order)
        if tuple(order) not in seen or len(top) < 3:
            seen.add(tuple(order))
            views.append(order)
    while len(views) < k:  # too few passages for k distinct orders
        views.append(views[len(views) % max(1, len(seen))])
    return views
