"""Short text for people: a value cut to a width, its end marked."""

from __future__ import annotations


def clip(text: str, width: int) -> str:
    """Return `text` whole if it fits `width` characters, else its start and "…" in that width."""
    return text if len(text) <= width else text[: width - 1] + "…"
