"""OpenAI wire details the simulated endpoint shares: counters, schemas in requests, logprobs."""

from __future__ import annotations

import json
import re
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

# What `infra.structured.json_instruction` puts before the schema when asking for JSON in words.
SCHEMA_IN_TEXT = re.compile(r"matching this JSON schema:\s*\n")


@dataclass
class SimulatorStats:
    """Counters shared by the handler threads; read them after the calls have returned."""

    calls: int = 0
    """Chat completions answered."""
    max_in_flight: int = 0
    """Most requests (chat and completions) sleeping at the same time."""
    by_model: dict[str, int] = field(default_factory=dict)
    """Chat completions per requested model name."""
    completions: int = 0
    """Legacy `/v1/completions` requests answered."""
    in_flight: int = 0
    """Requests sleeping right now."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def started(self, model: str | None = None) -> None:
        """Count one request entering its delay; `model` is set for chat completions."""
        with self._lock:
            if model is None:
                self.completions += 1
            else:
                self.calls += 1
                self.by_model[model] = self.by_model.get(model, 0) + 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def finished(self) -> None:
        """Count one request leaving its delay."""
        with self._lock:
            self.in_flight -= 1


class RequestError(Exception):
    """A request the simulator refuses; becomes an OpenAI-style error reply."""

    def __init__(self, status: int, message: str, *, retry_after: str | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def message_text(message: dict) -> str:
    """Return a chat message's text (string content, or its text parts joined)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def schema_from_messages(messages: list[dict]) -> dict | None:
    """Find a JSON schema written into the messages after "matching this JSON schema:"."""
    for text in map(message_text, messages):
        match = SCHEMA_IN_TEXT.search(text)
        if match is None:
            continue
        try:
            found, _ = json.JSONDecoder().raw_decode(text, match.end())
        except json.JSONDecodeError:
            continue
        if isinstance(found, dict):
            return found
    return None


def chosen_tool(request: dict) -> dict | None:
    """Return the function the request forces (by name, or the only one under "required")."""
    tools = [t.get("function", {}) for t in request.get("tools") or [] if isinstance(t, dict)]
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return next((t for t in tools if t.get("name") == name), None)
    if choice == "required" and tools:
        return tools[0]
    return None


def requested_schema(request: dict, messages: list) -> tuple[dict | None, dict | None]:
    """Return the forced tool (if any) and the JSON schema a chat request asks for (if any)."""
    tool = chosen_tool(request)
    response_format = request.get("response_format") or {}
    if tool is not None:
        return tool, tool.get("parameters", {})
    if response_format.get("type") == "json_schema":
        return None, response_format.get("json_schema", {}).get("schema", {})
    if response_format.get("type") == "json_object":
        # JSON mode without a schema in the messages: any object will do.
        return None, schema_from_messages(messages) or {"type": "object"}
    return None, None


def stream_body(reply: dict, request: dict, piece: int) -> str:
    """Return a finished chat completion as OpenAI's server-sent chunks, then [DONE]."""
    choice = reply["choices"][0]
    message = choice["message"]
    base = {
        "id": reply["id"],
        "object": "chat.completion.chunk",
        "created": reply["created"],
        "model": reply["model"],
    }
    if "system_fingerprint" in reply:
        base["system_fingerprint"] = reply["system_fingerprint"]

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    events += [chunk({"content": text[i : i + piece]}) for i in range(0, len(text), piece)]
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, **call}]}))
    events.append(chunk({}, choice["finish_reason"]))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append(base | {"choices": [], "usage": reply["usage"]})
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def token_logprob(token: str) -> float:
    """Return a deterministic negative log-probability for a token (crc32, not `hash`)."""
    return -(zlib.crc32(token.encode()) % 1000) / 250 - 0.1


def echo_logprobs(
    text: str, *, echo: bool, split: int | None = None, end: int = 0, spread: float = 0.0
) -> dict[str, Any]:
    """Return vLLM-style logprobs of a completion's text, split into whitespace tokens.

    Every token gets `token_logprob`, except that with `split` set a token starts exactly
    there and the tokens starting in [split, end) share `spread` between them (their sum is
    `spread`, whatever the float rounding): a scored continuation. The first token of an
    echoed prompt gets None: nothing comes before it.
    """
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    if split is not None:
        spans = [
            part
            for start, stop in spans
            for part in (
                ((start, split), (split, stop)) if start < split < stop else ((start, stop),)
            )
        ]
    tokens = [text[a:b] for a, b in spans]
    scores: list[float | None] = [token_logprob(t) for t in tokens]
    scored = [k for k, (a, _) in enumerate(spans) if split is not None and split <= a < end]
    for k in scored:
        scores[k] = spread / len(scored)
    if scored:
        scores[scored[-1]] = spread - sum(spread / len(scored) for _ in scored[:-1])
    if echo and scores:
        scores[0] = None
    return {
        "tokens": tokens,
        "token_logprobs": scores,
        "top_logprobs": [
            None if v is None else {t: v} for t, v in zip(tokens, scores, strict=True)
        ],
        "text_offset": [a for a, _ in spans],
    }
