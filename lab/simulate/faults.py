"""Faults the simulated endpoint injects: which, how often, and what a faulty reply says."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.simulate.schema_instance import schema_violation

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


class FaultBook:
    """Which requests an endpoint refuses or spoils, and the record of what it did."""

    def __init__(self, *, fail_first: int = 0, faults: FaultPlan | None = None):
        """Refuse the first `fail_first` POSTs with 429; draw faults from the plan's seed."""
        self._failures = fail_first
        self._failures_lock = threading.Lock()
        self.rejected = 0
        """Requests answered 429 so far."""
        self.faults = faults
        self.faults_injected: list[dict[str, Any]] = []
        """Every injected fault: request (number), kind, model, at (epoch seconds), key (see
        `request_key`), retry (the client's count), temperature; status (5xx) or variant
        (malformed)."""
        self.requests: list[dict[str, Any]] = []
        """Every chat completion received: request, model, key, retry (the client's count)."""
        self._rng = random.Random(faults.seed if faults else 0)
        self._requests_lock = threading.Lock()

    def take_failure(self) -> bool:
        """Tell whether this request should be rejected with 429 (counts one down)."""
        with self._failures_lock:
            if self._failures <= 0:
                return False
            self._failures -= 1
            self.rejected += 1
            return True

    def note_request(
        self, model: str, key: str, *, retry: int = 0, temperature: Any = None
    ) -> dict[str, Any] | None:
        """Number and record a chat completion; return the fault drawn for it, if any."""
        with self._requests_lock:
            number = len(self.requests) + 1
            self.requests.append({"request": number, "model": model, "key": key, "retry": retry})
            kind = self.faults.draw(self._rng) if self.faults else None
            if kind is None:
                return None
            fault: dict[str, Any] = {
                "request": number,
                "kind": kind,
                "model": model,
                "at": time.time(),
                "key": key,
                "retry": retry,
                "temperature": temperature,
            }
            same = sum(f["kind"] == kind for f in self.faults_injected)
            if kind == "server_error":
                fault["status"] = SERVER_ERRORS[same % len(SERVER_ERRORS)]
            elif kind == "malformed":
                fault["variant"] = ("invalid_json", "schema_violation")[same % 2]
            self.faults_injected.append(fault)
            return fault

    def fault_counts(self) -> dict[str, int]:
        """Return how many faults of each kind were injected so far (every kind listed)."""
        with self._requests_lock:
            counts = dict.fromkeys(FAULT_KINDS, 0)
            for fault in self.faults_injected:
                counts[fault["kind"]] += 1
            return counts


def request_key(texts: Sequence[str]) -> str:
    """Return a short digest of a chat request's message texts.

    The simulator records it with every request and every fault; a trace's call record
    (its prompt's contents) gives the same key, so a fault can be traced to the call it hit.
    """
    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode()).hexdigest()[:16]


def faulty_output(fault: dict[str, Any], schema: dict | None) -> str:
    """Return a malformed output (invalid JSON, or JSON breaking the schema) or an empty one."""
    if fault["kind"] == "empty":
        return ""
    marker = f"simulated fault {fault['request']}"
    if fault["variant"] == "invalid_json":
        return json.dumps({"fault": marker})[:-1] + ', "cut'
    return json.dumps(schema_violation(schema, marker))
