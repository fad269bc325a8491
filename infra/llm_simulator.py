"""A local OpenAI-compatible endpoint that answers schema-valid JSON after a fixed delay.

Benchmarks point the pipeline's chat models at it to measure how well LLM calls overlap: every
request sleeps `latency_s` in its own handler thread, so a pipeline that fans out well finishes
in a few multiples of the latency however many calls it makes. Answers are minimal but valid
instances of the schema the caller asked for (`json_schema`, `function_calling` or `json_mode`),
and `/v1/completions` echoes prompts with deterministic log-probabilities, the vLLM way.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PLACEHOLDER = "simulated"
# Past this nesting depth recursive schemas get only what they require, so instances stay finite.
MAX_DEPTH = 8
# What `infra.models.json_instruction` puts in front of the schema when asking for JSON in words.
SCHEMA_IN_TEXT = re.compile(r"matching this JSON schema:\s*\n")
STRING_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "uri": "https://example.org/simulated",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


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


def schema_instance(schema: dict, *, numbers: float = 0.9) -> Any:
    """Return a deterministic, minimal instance of a JSON Schema (pydantic v2 or OpenAI strict).

    Args:
        schema: the root schema; its `$defs`/`definitions` resolve every `$ref` below it.
        numbers: the value given to `number` fields, clipped into their bounds.
    """
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    return _instance(schema, defs, numbers, 0)


def _instance(schema: Any, defs: dict, numbers: float, depth: int) -> Any:
    if not isinstance(schema, dict):
        return None  # `true`/`false` schemas: anything goes
    if "$ref" in schema:
        target = _resolve(schema["$ref"], defs)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _instance(_merge(target, rest), defs, numbers, depth + 1)
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve(part["$ref"], defs) if "$ref" in part else part
            merged = _merge(merged, part)
        return _instance(merged, defs, numbers, depth)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            non_null = [o for o in options if o.get("type") != "null"]
            if depth > MAX_DEPTH and len(non_null) < len(options):
                return None
            option = non_null[0] if non_null else options[0]
            rest = {k: v for k, v in schema.items() if k != key}
            return _instance(_merge(rest, option), defs, numbers, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = _implied_type(schema)
    if kind == "object":
        return _object(schema, defs, numbers, depth)
    if kind == "array":
        return _array(schema, defs, numbers, depth)
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return _integer(schema)
    if kind == "number":
        return _number(schema, numbers)
    if kind == "boolean":
        return True
    return None


def _resolve(ref: str, defs: dict) -> dict:
    name = ref.rsplit("/", 1)[-1]
    if name not in defs:
        raise ValueError(f"unresolvable $ref {ref!r}")
    return defs[name]


def _merge(base: dict, extra: dict) -> dict:
    merged = {**base, **extra}
    if "properties" in base and "properties" in extra:
        merged["properties"] = {**base["properties"], **extra["properties"]}
    if "required" in base and "required" in extra:
        merged["required"] = [*base["required"], *extra["required"]]
    return merged


def _implied_type(schema: dict) -> str | None:
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if "minLength" in schema or "maxLength" in schema:
        return "string"
    if "minimum" in schema or "maximum" in schema:
        return "number"
    return None


def _object(schema: dict, defs: dict, numbers: float, depth: int) -> dict:
    properties = schema.get("properties", {})
    required = set(schema.get("required", properties))
    return {
        name: _instance(sub, defs, numbers, depth + 1)
        for name, sub in properties.items()
        if depth <= MAX_DEPTH or name in required
    }


def _array(schema: dict, defs: dict, numbers: float, depth: int) -> list:
    prefix = schema.get("prefixItems", [])
    lowest = schema.get("minItems", 0)
    # Unconstrained items (`list[Any]`, or a recursive `$ref` langchain's tool conversion drops)
    # have no value sure to validate, so only as many as required.
    wanted = 1 if depth <= MAX_DEPTH and schema.get("items") not in (None, {}, True) else 0
    count = max(lowest, len(prefix), wanted)
    if "maxItems" in schema:
        count = min(count, schema["maxItems"])
    items = schema.get("items", {})
    if items is False:
        count = min(count, len(prefix))
    return [
        _instance(prefix[i] if i < len(prefix) else items, defs, numbers, depth + 1)
        for i in range(count)
    ]


def _string(schema: dict) -> str:
    text = STRING_FORMATS.get(schema.get("format", ""), PLACEHOLDER)
    shortest = schema.get("minLength", 0)
    if len(text) < shortest:
        text += "x" * (shortest - len(text))
    if "maxLength" in schema:
        text = text[: schema["maxLength"]]
    return text


def _integer(schema: dict) -> int:
    if "minimum" in schema:
        value = int(-(-schema["minimum"] // 1))  # ceil, for float bounds
    elif "exclusiveMinimum" in schema:
        value = int(schema["exclusiveMinimum"] // 1) + 1
    else:
        value = 0
    if "maximum" in schema:
        value = min(value, int(schema["maximum"] // 1))
    if "exclusiveMaximum" in schema:
        value = min(value, int(-(-schema["exclusiveMaximum"] // 1)) - 1)
    return value


def _number(schema: dict, numbers: float) -> float:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    value = float(numbers)
    if low is not None and value < low:
        value = float(low)
    if high is not None and value > high:
        value = float(high)
    bottom, top = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if (bottom is not None and value <= bottom) or (top is not None and value >= top):
        if bottom is not None and top is not None:
            value = (bottom + top) / 2
        else:
            value = bottom + 1 if bottom is not None else top - 1
    return value


def schema_from_messages(messages: list[dict]) -> dict | None:
    """Find a JSON schema written into the messages after "matching this JSON schema:"."""
    for text in map(_message_text, messages):
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


def token_logprob(token: str) -> float:
    """Return a deterministic negative log-probability for a token (crc32, not `hash`)."""
    return -(zlib.crc32(token.encode()) % 1000) / 250 - 0.1


def _message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class RequestError(Exception):
    """A request the simulator refuses; becomes an OpenAI-style error reply."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: a benchmark makes thousands of requests."""

    def do_GET(self) -> None:
        """Answer `/v1/models`; anything else is a 404."""
        if self._route() == "/models":
            self._reply(200, {"object": "list", "data": [{"id": "simulated", "object": "model"}]})
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
                raise RequestError(400, "the simulator does not stream; send stream=false")
            self._reply(200, action(request))
        except json.JSONDecodeError as exc:
            self._error(400, f"malformed JSON body: {exc}")
        except RequestError as exc:
            self._error(exc.status, str(exc))
        except Exception as exc:
            # NOTE: 400, not 500: the openai client retries 5xx, which would skew the counts.
            self._error(400, f"the simulator cannot answer this request: {exc!r}")

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path.removeprefix("/v1")

    def _delay(self, model: str | None) -> None:
        stats = self.server.endpoint.stats
        stats.started(model)
        try:
            time.sleep(self.server.endpoint.latency_s)
        finally:
            stats.finished()

    def _chat(self, request: dict) -> dict:
        messages = request.get("messages")
        if not isinstance(messages, list):
            raise RequestError(400, "`messages` must be a list")
        model = str(request.get("model", PLACEHOLDER))
        self._delay(model)
        numbers = self.server.endpoint.numbers
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        tool = _chosen_tool(request)
        response_format = request.get("response_format") or {}
        if tool is not None:
            arguments = json.dumps(schema_instance(tool.get("parameters", {}), numbers=numbers))
            function = {"name": tool["name"], "arguments": arguments}
            call_id = f"call_sim_{self.server.next_id()}"
            message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
            finish, written = "tool_calls", arguments
        elif response_format.get("type") == "json_schema":
            schema = response_format.get("json_schema", {}).get("schema", {})
            message["content"] = written = json.dumps(schema_instance(schema, numbers=numbers))
        elif response_format.get("type") == "json_object":
            schema = schema_from_messages(messages)
            found = {} if schema is None else schema_instance(schema, numbers=numbers)
            message["content"] = written = json.dumps(found)
        else:
            message["content"] = written = PLACEHOLDER
        prompt_tokens = max(1, sum(len(_message_text(m)) for m in messages) // 4)
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
        choices = []
        for index, prompt in enumerate(prompts):
            text = " ".join(part for part in (prompt if echo else "", generated) if part)
            spans = list(re.finditer(r"\S+", text))
            tokens = [s.group(0) for s in spans]
            scores: list[float | None] = [token_logprob(t) for t in tokens]
            if echo and scores:
                scores[0] = None  # nothing comes before the first prompt token
            pairs = zip(tokens, scores, strict=True)
            logprobs = {
                "tokens": tokens,
                "token_logprobs": scores,
                "top_logprobs": [None if v is None else {t: v} for t, v in pairs],
                "text_offset": [s.start() for s in spans],
            }
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
        return {
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

    def _error(self, status: int, message: str, *, retry_after: str | None = None) -> None:
        kind = {404: "not_found_error", 429: "rate_limit_error"}.get(
            status, "invalid_request_error"
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
        self.end_headers()
        self.wfile.write(data)


def _chosen_tool(request: dict) -> dict | None:
    """Return the function the request forces (by name, or the only one under "required")."""
    tools = [t.get("function", {}) for t in request.get("tools") or [] if isinstance(t, dict)]
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return next((t for t in tools if t.get("name") == name), None)
    if choice == "required" and tools:
        return tools[0]
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, endpoint: SimulatedEndpoint):
        super().__init__((endpoint.host, endpoint.port), _Handler)
        self.endpoint = endpoint
        self._ids = 0
        self._ids_lock = threading.Lock()

    def next_id(self) -> int:
        with self._ids_lock:
            self._ids += 1
            return self._ids


class SimulatedEndpoint:
    """An OpenAI-compatible server on a free local port, for as long as the `with` block runs."""

    def __init__(
        self,
        latency_s: float = 1.0,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        numbers: float = 0.9,
        fail_first: int = 0,
    ):
        """Configure the endpoint; nothing listens until `__enter__`.

        Args:
            latency_s: seconds every chat completion and completion sleeps before replying.
            host: interface to bind.
            port: port to bind; 0 picks a free one.
            numbers: value given to `number` fields (clipped into their bounds).
            fail_first: answer the first N POSTs with 429 (Retry-After: 0), to exercise the
                clients' retries; they are not counted in the stats.
        """
        self._failures = fail_first
        self._failures_lock = threading.Lock()
        self.rejected = 0
        """Requests answered 429 so far."""
        self.latency_s = latency_s
        self.host = host
        self.port = port
        self.numbers = numbers
        self.stats = SimulatorStats()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._bound_port: int | None = None

    def take_failure(self) -> bool:
        """Tell whether this request should be rejected with 429 (counts one down)."""
        with self._failures_lock:
            if self._failures <= 0:
                return False
            self._failures -= 1
            self.rejected += 1
            return True

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
