"""Seeds per question: a method's random draws reproducible, and different for each question."""

from __future__ import annotations

import hashlib


def question_seed(seed: int, question: str) -> int:
    """Return a per-question seed, so runs are reproducible and questions differ."""
    digest = hashlib.sha256(f"{seed}|{question}".encode()).digest()
    return int.from_bytes(digest[:8], "big")
