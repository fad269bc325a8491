"""Which structured-output method an endpoint accepts: asked once, remembered per endpoint.

`json_schema` is the strictest (a grammar on servers that support it), but some servers refuse
it outright: llama-cpp-python's answers HTTP 500 "Input should be 'text' or 'json_object'". Such
a refusal is retried once with the next method that still carries the schema; the choice is
kept for the endpoint (base URL and model) for the rest of the process and logged once.
"""

from __future__ import annotations

import logging
import threading

from infra.settings import ModelSpec

log = logging.getLogger("quorum.models")

NEXT_METHOD = {"json_schema": "function_calling", "function_calling": "json_mode"}
"""The method tried when an endpoint refuses one; json_mode carries the schema in the prompt."""
_REFUSAL_WORDS = ("response_format", "json_schema", "json_object", "tool_choice", "tools")
_chosen: dict[tuple[str | None, str], str] = {}
_notes: dict[tuple[str | None, str], str] = {}
_lock = threading.Lock()


def _endpoint(spec: ModelSpec) -> tuple[str | None, str]:
    return spec.base_url, spec.model


def negotiated_method(spec: ModelSpec) -> str:
    """Return the method to ask this endpoint with: its configured one, or what it accepted."""
    with _lock:
        return _chosen.get(_endpoint(spec), spec.structured_method)


def negotiation_note(spec: ModelSpec) -> str | None:
    """Return why this endpoint is asked with another method than configured, if it is."""
    with _lock:
        return _notes.get(_endpoint(spec))


def refuses_method(exc: BaseException) -> bool:
    """Tell whether an API error is the server refusing the structured-output method itself."""
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    return status in (400, 422, 500, 501) and any(word in text for word in _REFUSAL_WORDS)


def remember_method(spec: ModelSpec, method: str, why: str) -> None:
    """Keep `method` for this endpoint from now on, and say so once."""
    key = _endpoint(spec)
    with _lock:
        first = key not in _chosen or _chosen[key] != method
        _chosen[key] = method
        _notes[key] = f"{spec.structured_method} refused ({why[:300]}); asking with {method}"
    if first:
        log.warning("model %r at %s: %s", spec.model, spec.base_url, _notes[key])
