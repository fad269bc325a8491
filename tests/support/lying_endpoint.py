"""A small OpenAI-compatible server that lies: stdlib, HTTP/1.1, connections kept alive.

stub_endpoint.py answers what a test scripts by role; this one answers every call minimally and
tells the lies a test chooses, by call number, to see each named by what it was.

It answers `GET /v1/models` and every chat completion with the smallest JSON the request's
schema allows (response_format, a forced tool, or a schema written into the prompt), streamed
when asked unless `ignore_stream` is set (a whole reply, as many small servers do). `lie` makes
it misbehave on chosen calls: an HTML page, a 404, a 401, text that is not JSON, JSON of the wrong
shape, an empty body, no choices, a 429 or a 500, a body cut off mid-way, a connection closed
without a reply.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.servers import serving

PAGE = b"<!doctype html><html><head><title>Welcome</title></head><body>It works!</body></html>"


@dataclass(frozen=True)
class Lie:
    """One misbehaving reply to a chat completion."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    send_bytes: int | None = None
    """Send only this many bytes of the body (announcing all of it), then close."""
    hang_up: bool = False
    """Close the connection without a word."""
    delay_s: float = 0.0
    """Wait this long before answering (a server busy with other requests)."""


LIES: dict[str, Lie] = {
    "html": Lie(body=PAGE, content_type="text/html; charset=utf-8"),
    "not_found": Lie(404, PAGE, "text/html"),
    "unauthorized": Lie(401, b'{"error": {"message": "Invalid API key"}}'),
    "forbidden": Lie(403, b'{"error": {"message": "Forbidden"}}'),
    "not_json": Lie(body=b"OK, here is my answer: yes", content_type="text/plain"),
    "wrong_shape": Lie(body=b'{"result": "yes", "status": "done"}'),
    "no_choices": Lie(body=b'{"id": "x", "object": "chat.completion", "choices": []}'),
    "empty": Lie(body=b""),
    "error_as_200": Lie(body=b'{"error": {"message": "model is loading"}}'),
    "truncated": Lie(body=b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, '),
    "cut": Lie(body=b'{"id": "x", "object": "chat.completion", "choices": []}', send_bytes=12),
    "hang_up": Lie(hang_up=True),
    "rate_limited": Lie(429, b'{"error": {"message": "slow down"}}', headers={"Retry-After": "0"}),
    "server_error": Lie(500, b'{"error": {"message": "internal error"}}'),
    "slow": Lie(delay_s=3.0, body=b'{"error": "too late to matter"}'),
}


@dataclass
class StubEndpoint:
    """What the stub saw, and how it lies."""

    base_url: str = ""
    ignore_stream: bool = False
    lie: Callable[[int], Lie | None] = lambda n: None
    """Given the chat completion's number (1, 2, …), the lie to tell, or None to answer."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every chat completion request's JSON body, lies included, in arrival order."""
    connections: int = 0
    """TCP connections accepted: fewer than requests when clients keep them alive."""
    cut: int = 0
    """Connections closed mid-reply or without one (`Lie.send_bytes`, `Lie.hang_up`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def answered(self) -> int:
        """Return how many chat completions were received."""
        return len(self.requests)


@contextmanager
def serve_stub(
    *, ignore_stream: bool = False, lie: Callable[[int], Lie | None] | None = None
) -> Iterator[StubEndpoint]:
    """Serve a StubEndpoint on a free loopback port for as long as the block runs."""
    stub = StubEndpoint(ignore_stream=ignore_stream)
    if lie is not None:
        stub.lie = lie

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with stub._lock:
                stub.connections += 1

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, _json({"object": "list", "data": [{"id": "m"}]}))
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            with stub._lock:
                stub.requests.append(request)
                number = len(stub.requests)
            told = stub.lie(number)
            if told is not None:
                self._tell(told)
                return
            reply = _completion(request, number)
            if request.get("stream") and not stub.ignore_stream:
                self._send(200, _events(reply), "text/event-stream")
            else:
                self._send(200, _json(reply))

        def _tell(self, lie: Lie) -> None:
            time.sleep(lie.delay_s)
            if lie.hang_up:
                self.close_connection = True
                with stub._lock:
                    stub.cut += 1
                return
            if lie.send_bytes is None:
                self._send(lie.status, lie.body, lie.content_type, lie.headers)
                return
            self.send_response(lie.status)
            self.send_header("Content-Type", lie.content_type)
            self.send_header("Content-Length", str(len(lie.body) + 100))
            self.end_headers()
            self.wfile.write(lie.body[: lie.send_bytes])
            self.wfile.flush()
            self.close_connection = True
            with stub._lock:
                stub.cut += 1

        def _send(
            self,
            status: int,
            body: bytes,
            kind: str = "application/json",
            headers: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    with serving(Handler) as port:
        stub.base_url = f"http://127.0.0.1:{port}/v1"
        yield stub


def every(nth: int, lie: str, *, first: int | None = None) -> Callable[[int], Lie | None]:
    """Return a lie told on every `nth` call (from call `first`, `nth` by default)."""
    start = nth if first is None else first
    return lambda n: LIES[lie] if n >= start and (n - start) % nth == 0 else None


def always(lie: str) -> Callable[[int], Lie | None]:
    """Return a lie told on every call."""
    return lambda n: LIES[lie]


def _json(data: Any) -> bytes:
    return json.dumps(data).encode()


def _completion(request: dict[str, Any], number: int) -> dict[str, Any]:
    tool, schema = _asked(request)
    text = json.dumps(minimal(schema)) if schema is not None else "stub"
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish = "stop"
    if tool is not None:
        call = {"id": f"call_{number}", "type": "function"}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [call | {"function": {"name": tool, "arguments": text}}],
        }
        finish = "tool_calls"
    return {
        "id": f"stub-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(request.get("model", "m")),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _asked(request: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """Return the forced tool's name (if any) and the JSON schema the request asks for."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        name = choice.get("function", {}).get("name")
        for tool in request.get("tools") or []:
            if tool.get("function", {}).get("name") == name:
                return name, tool["function"].get("parameters", {})
    form = request.get("response_format") or {}
    if form.get("type") == "json_schema":
        return None, form.get("json_schema", {}).get("schema", {})
    for message in request.get("messages", []):
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        marker = "matching this JSON schema:\n"
        if marker in text:
            found, _ = json.JSONDecoder().raw_decode(text, text.index(marker) + len(marker))
            return None, found
    return None, {"type": "object"} if form.get("type") == "json_object" else None


def minimal(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """Return the smallest value a JSON schema allows (strings say "stub")."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return minimal(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return minimal(options[0], defs)
    kind = schema.get("type", "object")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: minimal(properties[name], defs) for name in properties}
    if kind == "array":
        return [minimal(schema.get("items", {}), defs) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "stub".ljust(schema.get("minLength", 0), "s")
    if kind in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", max(1, low))
        value = min(max(0.9, low), high)
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    return None


def _events(reply: dict[str, Any]) -> bytes:
    """Return a finished chat completion as OpenAI's server-sent chunks, then [DONE]."""
    base = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    message = reply["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text = message.get("content") or ""
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": text[i : i + 8]}) for i in range(0, len(text), 8)]
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, **call}]}))
    events.append(chunk({}, reply["choices"][0]["finish_reason"]))
    events.append(base | {"choices": [], "usage": reply["usage"]})
    lines = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (lines + "data: [DONE]\n\n").encode()
