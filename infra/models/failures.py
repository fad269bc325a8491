"""A failed call to an OpenAI-compatible endpoint in words: what happened, with the next step.

The OpenAI library's own words say what failed inside it ("Connection error.",
"AssertionError", "'str' object has no attribute 'choices'"); a user needs what the server did.
Every call's error in the trace, and the line `ask` prints when no model answered, come from
`describe`; whether a failure is worth another try is `transient`'s (infra/models/retries.py).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from infra.models.http import WEB_PAGE_HINT, BadReply
from infra.text import clip

SHOWN = 200
"""Characters of a server's own error message kept in a call's error."""
SLOW_HINT = (
    "a server that answers one request at a time wants max_concurrency = 1 and a timeout_s "
    "that covers a whole prompt"
)
"""What a timeout most often means: calls queued at the server, each waiting for the others."""

Transience = Literal["busy", "lost"]
""""busy": the server answered that it cannot now (429, 5xx); "lost": no answer came (a
timeout, a dropped connection)."""


def status_of(exc: BaseException) -> int | None:
    """Return the HTTP status of a failed call, or None when no status came back."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def transient(exc: BaseException) -> Transience | None:
    """Tell whether another try may succeed, and why; None when it cannot."""
    import openai

    status = status_of(exc)
    if status is not None:
        return "busy" if status in (408, 409, 429) or status >= 500 else None
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | TimeoutError):
        return "lost"  # TimeoutError: a stream that fell silent (langchain-openai's chunk timer)
    return None


def retry_after(exc: BaseException) -> float | None:
    """Return the seconds the server asked to wait (Retry-After, retry-after-ms), or None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, unit in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * unit
        except ValueError:
            from email.utils import parsedate_to_datetime

            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            from datetime import UTC, datetime

            seconds = (when - datetime.now(UTC)).total_seconds()
        return max(0.0, seconds)
    return None


def describe(exc: BaseException, *, url: str, key_env: str | None, timeout_s: float) -> str:
    """Return what happened in one line (no type names unless nothing better is known)."""
    import openai

    if isinstance(exc, BadReply):
        return str(exc)
    status = status_of(exc)
    if status is not None:
        return _status_words(exc, status, url, key_env)
    if isinstance(exc, openai.APITimeoutError):
        return f"no reply within {timeout_s:g} s (timeout_s); {SLOW_HINT}"
    if isinstance(exc, TimeoutError):
        return f"no streamed text within {timeout_s:g} s (timeout_s); {SLOW_HINT}"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        while isinstance(cause, openai.APIConnectionError):  # langchain-openai wraps it again
            cause = cause.__cause__
        return _connection_words(cause, url)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {clip(text, 2000)}" if text else type(exc).__name__


def _status_words(exc: BaseException, status: int, url: str, key_env: str | None) -> str:
    said = server_said(exc)
    told = f": {said}" if said else ""
    if status in (401, 403):
        if key_env:
            return f"the key in {key_env} was refused (HTTP {status}{told})"
        return (
            f"the server wants a key (HTTP {status}{told}); name the variable holding it with "
            "api_key_env (--api-key-env)"
        )
    if status == 404:
        if said and not _is_page(exc):
            return (
                f"HTTP 404 from {url}/chat/completions{told}; check the model name, and that "
                f"base_url is the API root, ending in /v1"
            )
        return f"no chat completions at {url}/chat/completions (HTTP 404); {WEB_PAGE_HINT}"
    if status == 429:
        wait = retry_after(exc)
        asked = f", Retry-After {wait:g} s" if wait is not None else ""
        return f"rate limited (HTTP 429{asked}{told})"
    if status >= 500:
        return f"the server failed (HTTP {status}{told})"
    return f"the server refused the request (HTTP {status}{told})"


def _connection_words(cause: BaseException | None, url: str) -> str:
    name = type(cause).__name__ if cause is not None else ""
    detail = clip(" ".join(str(cause).split()), SHOWN) if cause is not None else ""
    if name == "ConnectError":
        return f"nothing answers at {url}; start the server, or set base_url to one that runs"
    if name == "RemoteProtocolError":
        return f"the server closed the connection before its reply was whole ({detail})"
    if name in ("ReadError", "WriteError"):
        return f"the connection broke during the call ({name}: {detail})"
    return f"the connection failed ({name}: {detail})" if name else "the connection failed"


def _is_page(exc: BaseException) -> bool:
    response = getattr(exc, "response", None)
    kind = getattr(response, "headers", {}).get("content-type", "") if response else ""
    return "html" in kind.lower()


def server_said(exc: BaseException) -> str:
    """Return the server's own error message, on one line and short ("" for a web page)."""
    if _is_page(exc):
        return "a web page"
    body: Any = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            body = error.get("message") or error.get("detail") or json.dumps(error)
        else:
            body = error
    if body is None:
        response = getattr(exc, "response", None)
        try:
            body = response.text if response is not None else ""
        except Exception:  # a streamed body never read: nothing more to say
            body = ""
    return clip(" ".join(str(body).split()), SHOWN)
