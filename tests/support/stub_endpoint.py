"""A small OpenAI-compatible endpoint over HTTP/1.1 keep-alive whose replies a test scripts by role.

What a user's own server is to quorum: it lists its model at `GET /v1/models` and answers
`POST /v1/chat/completions` with one assistant message. The test gives a function of (role,
prompt) that returns the reply's JSON; the role is read from the JSON schema quorum asks the
reply to match (a query, duplicates, a member's answer, synthesis, verdicts), so the stub knows
nothing of quorum's prompt wording. Every request is kept, and the connections it came on: a
client that keeps its connection alive sends many requests on one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[str, str], Any]
"""(role, prompt text) -> the reply: a dict (sent as JSON) or a string (sent as it is)."""

ROLES = (
    ("verify", {"verdicts"}),
    ("synthesize", {"exact_answer", "ideal_answer"}),
    ("ensemble", {"answer", "pmids"}),
    ("organize", {"duplicates"}),
    ("query", {"query"}),
)
"""Which call a request is, by the properties of the schema it asks for (first match wins)."""


def role_of(request: dict[str, Any]) -> str:
    """Return which quorum call a chat completion request is, from its response schema."""
    schema = ((request.get("response_format") or {}).get("json_schema") or {}).get("schema")
    if schema is None:
        tools = request.get("tools") or [{}]
        schema = (tools[0].get("function") or {}).get("parameters") or {}
    wanted = set(schema.get("properties") or {})
    return next((role for role, keys in ROLES if keys <= wanted), "other")


def prompt_of(request: dict[str, Any]) -> str:
    """Return every message of a request as one text."""
    parts = []
    for message in request.get("messages") or []:
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n\n".join(parts)


@dataclass
class StubEndpoint:
    """What the stub was asked: (role, prompt) per completion, and the connections used."""

    name: str
    reply: Reply
    base_url: str = ""
    asked: list[tuple[str, str]] = field(default_factory=list)
    connections: list[int] = field(default_factory=list)
    """Requests served on each connection, in the order the connections opened."""

    def roles(self) -> list[str]:
        """Return the role of every completion asked, in order."""
        return [role for role, _ in self.asked]


@contextmanager
def serve_stub(name: str, reply: Reply) -> Iterator[StubEndpoint]:
    """Serve a stub model named `name` on a free loopback port while the block runs."""
    stub = StubEndpoint(name, reply)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection serves many requests

        def setup(self) -> None:
            super().setup()
            with lock:
                self.number = len(stub.connections)
                stub.connections.append(0)

        def do_GET(self) -> None:
            self._count()
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no {self.path} here"}})

        def do_POST(self) -> None:
            self._count()
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            request = json.loads(body or b"{}")
            role, prompt = role_of(request), prompt_of(request)
            with lock:
                stub.asked.append((role, prompt))
            said = stub.reply(role, prompt)
            text = said if isinstance(said, str) else json.dumps(said)
            message = {"role": "assistant", "content": text}
            self._send(
                200,
                {
                    "id": f"{name}-{len(stub.asked)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": name,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
                },
            )

        def _count(self) -> None:
            with lock:
                stub.connections[self.number] += 1

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    stub.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def spec(stub: StubEndpoint) -> dict[str, str]:
    """Return the model spec (settings) that points a role at the stub."""
    return {"provider": "openai", "model": stub.name, "base_url": stub.base_url}
