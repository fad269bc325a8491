"""Short text for people: a value cut to a width, its end marked; a URL shown without secrets."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def clip(text: str, width: int) -> str:
    """Return `text` whole if it fits `width` characters, else its start and "…" in that width."""
    return text if len(text) <= width else text[: width - 1] + "…"


def shown_url(url: str) -> str:
    """Return `url` without any user:password part (secrets never reach the terminal)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))
