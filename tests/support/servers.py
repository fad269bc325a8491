"""Servers the integration tests talk to: a fake E-utilities, a fixed-reply OpenAI-compatible
endpoint and the real Elasticsearch node."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.support.data import EFETCH_XML, ESEARCH_JSON, ROOT

# Where the session's Elasticsearch node lives and listens (.ci/run picks both).
WORK = Path(os.environ.get("QUORUM_ES_DIR") or ROOT / ".ci" / "work" / "elasticsearch")
PORT = int(os.environ.get("QUORUM_ES_PORT", "9200"))


@dataclass
class FakeEutils:
    """Records every request; scripted (status, headers, body) replies are served first."""

    base_url: str = ""
    requests: list[tuple[str, dict[str, list[str]], float]] = field(default_factory=list)
    script: dict[str, list[tuple[int, dict[str, str], bytes]]] = field(default_factory=dict)
    esearch_body: bytes = ESEARCH_JSON
    delay_s: float = 0.0

    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]

    def reply(self, path: str) -> tuple[int, dict[str, str], bytes]:
        if self.script.get(path):
            return self.script[path].pop(0)
        if path.endswith("/esearch.fcgi"):
            return 200, {"Content-Type": "application/json"}, self.esearch_body
        if path.endswith("/efetch.fcgi"):
            return 200, {"Content-Type": "text/xml"}, EFETCH_XML
        return 404, {}, b"not found"


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """Serve `handler` on a free loopback port for as long as the block runs; yield the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def serve_eutils() -> Iterator[FakeEutils]:
    """Serve a FakeEutils on a free local port for as long as the block runs."""
    fake = FakeEutils()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlsplit(self.path)
            fake.requests.append((url.path, parse_qs(url.query), time.monotonic()))
            time.sleep(fake.delay_s)
            status, headers, body = fake.reply(url.path)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with serving(Handler) as port:
        fake.base_url = f"http://127.0.0.1:{port}/entrez/eutils"
        yield fake


@dataclass
class FixedReplies:
    """An OpenAI-compatible endpoint whose every chat completion says the same text."""

    text: str
    base_url: str = ""
    completions: int = 0


@contextmanager
def serve_fixed_replies(text: str) -> Iterator[FixedReplies]:
    """Serve an endpoint answering `GET /v1/models` and every chat completion with `text`."""
    fake = FixedReplies(text)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "fixed", "object": "model"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            fake.completions += 1
            message = {"role": "assistant", "content": fake.text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
            self._send(
                {
                    "id": f"fixed-{fake.completions}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fixed",
                    "choices": [choice],
                    "usage": usage,
                }
            )

        def _send(self, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with serving(Handler) as port:
        fake.base_url = f"http://127.0.0.1:{port}/v1"
        yield fake
