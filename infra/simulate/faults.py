"""Faults the simulated endpoint injects: which, how often, and what a faulty reply says."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infra.simulate.schema_instance import schema_violation

FAULT_KINDS = ("server_error", "rate_limit", "timeout", "malformed", "empty")
SERVER_ERRORS = (500, 502, 503)


@dataclass(frozen=True)
class FaultPlan:
    """Chances that a chat completion is answered with a fault; one seeded draw per request."""

    server_error: float = 0.10
    """HTTP 500, 502 or 503 with an OpenAI-style JSON error (the client retries it)."""
    rate_limit: float = 0.05
    """HTTP 429 with `Retry-After: 0` (the client retries it)."""
    timeout: float = 0.05
    """Sleep `timeout_sleep_s`, then answer normally: the client has given up by then."""
    malformed: float = 0.05
    """A 200 whose output is invalid JSON or, alternately, JSON that violates the schema."""
    empty: float = 0.02
    """A 200 whose content is the empty string."""
    seed: int = 0
    """Seed of the draws: the same requests in the same order meet the same faults."""
    timeout_sleep_s: float = 5.0
    """How long a `timeout` fault sleeps; longer than the clients' timeout."""

    def __post_init__(self) -> None:
        """Refuse chances outside [0, 1] or adding up to more than 1."""
        chances = self.chances()
        if any(not 0.0 <= p <= 1.0 for p in chances.values()) or sum(chances.values()) > 1.0:
            raise ValueError(f"fault chances must be in [0, 1] and sum to at most 1: {chances}")
        if self.timeout_sleep_s < 0:
            raise ValueError("timeout_sleep_s must not be negative")

    def chances(self) -> dict[str, float]:
        """Return the chance of each fault kind."""
        return {kind: getattr(self, kind) for kind in FAULT_KINDS}

    def draw(self, rng: random.Random) -> str | None:
        """Return the fault kind one draw from `rng` lands on, or None for a normal answer."""
        roll, edge = rng.random(), 0.0
        for kind, chance in self.chances().items():
            edge += chance
            if roll < edge:
                return kind
        return None


def request_key(texts: Sequence[str]) -> str:
    """Return a short digest of a chat request's message texts.

    The simulator records it with every request and every fault; a trace's call record
    (its prompt's contents) gives the same key, so a fault can be traced to the call it hit.
    """
    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode()).hexdigest()[:16]


def fault_record(
    kind: str, number: int, earlier: Sequence[dict[str, Any]], **request: Any
) -> dict[str, Any]:
    """Return the record of request `number`'s fault, with the request's details.

    5xx statuses and malformed variants take turns with the earlier faults of the same kind.
    """
    fault: dict[str, Any] = {
        "request": number,
        "kind": kind,
        "model": request.get("model"),
        "at": time.time(),
        **{k: request.get(k) for k in ("key", "retry", "temperature")},
    }
    same = sum(f["kind"] == kind for f in earlier)
    if kind == "server_error":
        fault["status"] = SERVER_ERRORS[same % len(SERVER_ERRORS)]
    elif kind == "malformed":
        fault["variant"] = ("invalid_json", "schema_violation")[same % 2]
    return fault


def faulty_output(fault: dict[str, Any], schema: dict | None) -> str:
    """Return a malformed output (invalid JSON, or JSON breaking the schema) or an empty one."""
    if fault["kind"] == "empty":
        return ""
    marker = f"simulated fault {fault['request']}"
    if fault["variant"] == "invalid_json":
        return json.dumps({"fault": marker})[:-1] + ', "cut'
    return json.dumps(schema_violation(schema, marker))
