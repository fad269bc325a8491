"""A local OpenAI-compatible endpoint that answers schema-valid JSON after a fixed delay.

Benchmarks point the pipeline's chat models at it to measure how well LLM calls overlap: every
request sleeps `latency_s` in its own handler thread, so a pipeline that fans out well finishes
in a few multiples of the latency however many calls it makes. Answers are minimal but valid
instances of the schema the caller asked for (`json_schema`, `function_calling` or `json_mode`),
and `/v1/completions` echoes prompts with deterministic log-probabilities, the vLLM way.

A `FaultPlan` makes it misbehave like a real endpoint under load: some chat completions get a
5xx, a 429, a reply slower than the client's timeout, malformed JSON or an empty answer, drawn
from a seeded RNG; every injected fault is recorded, so a benchmark can check what absorbed it.

Given plants (`planted=`, see `planted.py`), it becomes a reader with planted biases
(`reader.py`, `replies.py`): chat completions that show numbered passages of a planted question
are answered from one passage the position-biased reader reads, `/v1/completions` log-probs
follow the same model, `GET /v1/reader` returns its settings, and every reply carries them in
the `x-quorum-reader` header and the `system_fingerprint` field.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lab.simulate.faults import FAULT_KINDS, FaultBook, FaultPlan, faulty_output, request_key
from lab.simulate.planted import Plants
from lab.simulate.protocol import (
    RequestError,
    SimulatorStats,
    echo_logprobs,
    message_text,
    requested_schema,
    schema_from_messages,
    stream_body,
    token_logprob,
)
from lab.simulate.reader import READER_HEADER, PlantedReader, ReaderSettings
from lab.simulate.replies import chat_reply
from lab.simulate.schema_instance import PLACEHOLDER, schema_instance
from lab.simulate.verify import is_verify_request, verify_reply

__all__ = [
    "FAULT_KINDS",
    "FaultPlan",
    "PlantedReader",
    "Plants",
    "ReaderSettings",
    "RequestError",
    "SimulatedEndpoint",
    "SimulatorStats",
    "request_key",
    "schema_from_messages",
    "schema_instance",
    "token_logprob",
]

STREAM_PIECE = 8
"""Characters per streamed chunk."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: a benchmark makes thousands of requests."""

    def setup(self) -> None:
        """Send each write at once, without waiting to coalesce small packets."""
        # NOTE: headers and body go out in two writes; Nagle's algorithm held the second for
        # the client's delayed ACK, adding 40 ms to every reply.
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        """Answer `/v1/models` and, with plants, `/v1/reader`; anything else is a 404."""
        reader = self.server.endpoint.reader
        if self._route() == "/models":
            self._reply(200, {"object": "list", "data": [{"id": "simulated", "object": "model"}]})
        elif self._route() == "/reader" and reader is not None:
            self._reply(200, reader.describe())
        else:
            self._error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        """Answer chat completions and completions after the simulated latency."""
        routes = {"/chat/completions": self._chat, "/completions": self._completion}
        if "Transfer-Encoding" in self.headers:
            self.close_connection = True  # the unread body would poison the kept-alive stream
            self._error(411, "send the body with a Content-Length")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        action = routes.get(self._route())
        if action is None:
            self._error(404, f"no route for POST {self.path}")
            return
        if self.server.endpoint.take_failure():
            self._error(429, "simulated rate limit", retry_after="0")
            return
        try:
            request = json.loads(body or b"null")
            if not isinstance(request, dict):
                raise RequestError(400, "the request body must be a JSON object")
            if request.get("stream"):
                if action != self._chat:
                    raise RequestError(400, "the simulator streams chat completions only")
                self._stream(self._chat(request), request)
                return
            self._reply(200, action(request))
        except json.JSONDecodeError as exc:
            self._error(400, f"malformed JSON body: {exc}")
        except RequestError as exc:
            self._error(exc.status, str(exc), retry_after=exc.retry_after)
        except Exception as exc:
            # NOTE: 400, not 500: the openai client retries 5xx, which would skew the counts.
            self._error(400, f"the simulator cannot answer this request: {exc!r}")

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path.removeprefix("/v1")

    def _delay(self, model: str | None, seconds: float | None = None) -> None:
        stats = self.server.endpoint.stats
        stats.started(model)
        try:
            time.sleep(self.server.endpoint.latency_s if seconds is None else seconds)
        finally:
            stats.finished()

    def _chat(self, request: dict) -> dict:
        messages = request.get("messages")
        if not isinstance(messages, list):
            raise RequestError(400, "`messages` must be a list")
        model = str(request.get("model", PLACEHOLDER))
        endpoint = self.server.endpoint
        response_format = request.get("response_format") or {}
        if endpoint.refuse_json_schema and response_format.get("type") == "json_schema":
            # llama-cpp-python 0.3's server, word for word.
            raise RequestError(
                500,
                "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  "
                "Input should be 'text' or 'json_object' [type=literal_error, "
                "input_value='json_schema', input_type=str]",
            )
        retry = self.headers.get("x-stainless-retry-count", "0")
        fault = endpoint.note_request(
            model,
            request_key([message_text(m) for m in messages if isinstance(m, dict)]),
            retry=int(retry) if retry.isdigit() else 0,
            temperature=request.get("temperature"),
        )
        if fault is not None and fault["kind"] == "server_error":
            raise RequestError(fault["status"], "simulated server error")
        if fault is not None and fault["kind"] == "rate_limit":
            raise RequestError(429, "simulated rate limit", retry_after="0")
        timeout = fault is not None and fault["kind"] == "timeout"
        self._delay(model, endpoint.faults.timeout_sleep_s if timeout and endpoint.faults else None)
        numbers = endpoint.numbers
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        tool, schema = requested_schema(request, messages)
        read = None
        turns = [(str(m.get("role", "")), message_text(m)) for m in messages]
        if fault is None and schema is not None and is_verify_request(schema):
            read = verify_reply(turns, endpoint.reader)  # from its members' facts
        elif endpoint.reader is not None and fault is None:
            temperature = request.get("temperature")
            sampling = float(temperature) if isinstance(temperature, int | float) else None
            read = chat_reply(endpoint.reader, turns, schema, sampling)
        if fault is not None and fault["kind"] in ("malformed", "empty"):
            written = faulty_output(fault, schema)
        elif read is not None:
            written = read if isinstance(read, str) else json.dumps(read, ensure_ascii=False)
        elif schema is not None:
            written = json.dumps(schema_instance(schema, numbers=numbers))
        else:
            written = PLACEHOLDER
        if tool is not None and written:
            function = {"name": tool["name"], "arguments": written}
            call_id = f"call_sim_{self.server.next_id()}"
            message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
            finish = "tool_calls"
        else:
            message["content"] = written
        prompt_tokens = max(1, sum(len(message_text(m)) for m in messages) // 4)
        return self._envelope(
            "chatcmpl",
            model,
            [{"index": 0, "message": message, "finish_reason": finish}],
            (prompt_tokens, max(1, len(written) // 4)),
        )

    def _completion(self, request: dict) -> dict:
        prompts = request.get("prompt", "")
        prompts = [prompts] if isinstance(prompts, str) else prompts
        if not all(isinstance(p, str) for p in prompts):
            raise RequestError(400, "`prompt` must be a string or a list of strings")
        self._delay(None)
        echo = bool(request.get("echo"))
        generated = "" if request.get("max_tokens") == 0 else PLACEHOLDER
        reader = self.server.endpoint.reader
        choices = []
        for index, prompt in enumerate(prompts):
            # A continuation starts with its own space, as a real tokenizer's would.
            text = " ".join(part for part in (prompt if echo else "", generated) if part)
            text = text if echo or not text else f" {text}"
            scored = reader.score(prompt) if reader is not None and echo else None
            if scored is None:
                logprobs = echo_logprobs(text, echo=echo)
            else:
                logprobs = echo_logprobs(
                    text, echo=echo, split=scored.start, end=len(prompt), spread=scored.logprob
                )
            if echo and self.server.endpoint.shift_echo:
                # llama-cpp-python's bug: each echoed token carries its neighbour's figure.
                figures = logprobs["token_logprobs"]
                first = token_logprob(logprobs["tokens"][0]) if figures else None
                logprobs["token_logprobs"] = [None, first, *figures[1:-1]][: len(figures)]
            choices.append(
                {
                    "index": index,
                    "text": text,
                    "logprobs": logprobs if request.get("logprobs") is not None else None,
                    "finish_reason": "length",
                }
            )
        usage = (sum(len(p.split()) for p in prompts), len(prompts) * len(generated.split()))
        return self._envelope("cmpl", str(request.get("model", PLACEHOLDER)), choices, usage)

    def _envelope(self, kind: str, model: str, choices: list, usage: tuple[int, int]) -> dict:
        objects = {"chatcmpl": "chat.completion", "cmpl": "text_completion"}
        reader = self.server.endpoint.reader
        fingerprint = {"system_fingerprint": reader.fingerprint()} if reader is not None else {}
        return fingerprint | {
            "id": f"{kind}-sim-{self.server.next_id()}",
            "object": objects[kind],
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }

    def _stream(self, reply: dict, request: dict) -> None:
        """Send a finished chat completion as OpenAI's server-sent chunks, then [DONE]."""
        body = stream_body(reply, request, STREAM_PIECE)
        # No length is known up front in a stream: the connection's end ends the body.
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self._reader_header()
        self.end_headers()
        self.wfile.write(body.encode())

    def _error(self, status: int, message: str, *, retry_after: str | None = None) -> None:
        kind = {404: "not_found_error", 429: "rate_limit_error"}.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self._reply(status, {"error": {"message": message, "type": kind, "code": None}}, headers)

    def _reply(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self._reader_header()
        self.end_headers()
        self.wfile.write(data)

    def _reader_header(self) -> None:
        if (reader := self.server.endpoint.reader) is not None:
            self.send_header(READER_HEADER, reader.fingerprint())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's listen backlog is 5: a batch opening dozens of connections at once would
    # see the rest wait for SYN retransmits (a second each), a limit of the simulator, not of
    # the client being measured.
    request_queue_size = 256

    def __init__(self, endpoint: SimulatedEndpoint):
        super().__init__((endpoint.host, endpoint.port), _Handler)
        self.endpoint = endpoint
        self._ids = 0
        self._ids_lock = threading.Lock()

    def next_id(self) -> int:
        with self._ids_lock:
            self._ids += 1
            return self._ids

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hung up (gave up on a slow reply, or died); report the rest."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class SimulatedEndpoint(FaultBook):
    """An OpenAI-compatible server on a free local port, for as long as the `with` block runs."""

    def __init__(
        self,
        latency_s: float = 1.0,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        numbers: float = 0.9,
        fail_first: int = 0,
        faults: FaultPlan | None = None,
        planted: Plants | str | Path | Sequence[dict[str, Any]] | None = None,
        reader: ReaderSettings | None = None,
        refuse_json_schema: bool = False,
        shift_echo: bool = False,
    ):
        """Configure the endpoint; nothing listens until `__enter__`.

        Args:
            latency_s: seconds every chat completion and completion sleeps before replying.
            host: interface to bind.
            port: port to bind; 0 picks a free one.
            numbers: value given to `number` fields (clipped into their bounds).
            fail_first: answer the first N POSTs with 429 (Retry-After: 0), to exercise the
                clients' retries; they are not counted in the stats.
            faults: chances of injected faults per chat completion; errors (5xx, 429) are not
                counted in the stats, slow, malformed and empty answers are.
            planted: plants (a plant file, question objects, or `Plants`); with them the
                endpoint is a reader with planted biases. Without them it answers as it
                always has.
            reader: the planted reader's settings (default `ReaderSettings()`); needs plants.
            refuse_json_schema: answer a `json_schema` response format with llama.cpp's own
                HTTP 500, as llama-cpp-python's server does.
            shift_echo: echo each prompt token with its neighbour's figure, as
                llama-cpp-python's server (0.3.x) does; completions' own figures stay right.
        """
        if reader is not None and planted is None:
            raise ValueError("reader settings need plants (planted=...)")
        super().__init__(fail_first=fail_first, faults=faults)
        self.reader = PlantedReader(Plants.load(planted), reader) if planted is not None else None
        """The planted reader, when plants were given."""
        self.latency_s = latency_s
        self.refuse_json_schema = refuse_json_schema
        self.shift_echo = shift_echo
        self.host = host
        self.port = port
        self.numbers = numbers
        self.stats = SimulatorStats()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._bound_port: int | None = None

    @property
    def base_url(self) -> str:
        """Return the OpenAI base URL, e.g. `http://127.0.0.1:PORT/v1`."""
        if self._bound_port is None:
            raise RuntimeError("the endpoint has not started; use it as a context manager")
        return f"http://{self.host}:{self._bound_port}/v1"

    def __enter__(self) -> SimulatedEndpoint:
        self._server = _Server(self)
        self._bound_port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="llm-simulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server, self._thread = None, None
