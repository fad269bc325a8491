"""Structured replies: JSON read out of a reply, and a reply cut off at the token limit.

A grammar-constrained decoder always produces schema-valid text, but only if it may finish: a
small model that fills a 600-character string with `]]]]` reaches `max_tokens` first, and the
reply ends mid-string. Such a reply is detected, asked again once with every bound halved, and
otherwise reported as a failed call with that reason: never an empty answer passed off as one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.messages import AIMessage
from pydantic import BaseModel

from infra.text import clip

Schema = TypeVar("Schema", bound=BaseModel)
BRIEF = (
    "Your previous reply was cut off at the length limit. Keep every field short: a sentence or "
    "two at most, no repetition."
)
MIN_LENGTH = 16
"""A string bound is never tightened below this many characters."""
UNBOUNDED_LENGTH = 512
"""What an unbounded string is taken to allow before it is tightened."""
REPLY_SLACK = 2000
"""Characters a reply may hold beyond its schema's longest JSON: code fences, a sentence of
chatter, indentation."""
SHOWN_OVER_LONG = 2000
"""Characters of an over-long reply kept in its call record (the whole can be megabytes)."""


def was_cut_off(message: AIMessage | None, max_tokens: int | None) -> bool:
    """Tell whether a reply stopped because it ran out of tokens."""
    if message is None:
        return False
    metadata = message.response_metadata or {}
    reason = metadata.get("finish_reason") or metadata.get("stop_reason")
    if reason in ("length", "max_tokens"):
        return True
    produced = (message.usage_metadata or {}).get("output_tokens", 0)
    return bool(max_tokens) and produced >= max_tokens


def tightened(schema: Any, factor: float = 0.5) -> Any:
    """Return a copy of a JSON schema with every string length and array size bound shrunk."""
    if isinstance(schema, list):
        return [tightened(item, factor) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: tightened(value, factor) for key, value in schema.items()}
    if out.get("type") == "string" and "enum" not in out and "const" not in out:
        bound = out.get("maxLength", UNBOUNDED_LENGTH)
        floor = max(MIN_LENGTH, out.get("minLength", 0))
        out["maxLength"] = max(floor, min(int(bound * factor), bound))
    if out.get("type") == "array" and "maxItems" in out:
        out["maxItems"] = max(out.get("minItems", 1), int(out["maxItems"] * factor))
    return out


def over_long(schema: dict[str, Any], raw: str) -> str | None:
    """Return why `raw` is longer than any reply `schema` allows, or None.

    A schema whose strings and arrays are all bounded has a longest JSON text: every character
    written as a six-character escape, plus REPLY_SLACK. A 200,000-character reply to a schema
    allowing a few thousand is a failed call named as such, not a parse error deep in it.
    """
    longest = longest_json(schema)
    if longest is None or len(raw) <= longest + REPLY_SLACK:
        return None
    allowed = longest + REPLY_SLACK
    return (
        f"the reply is over-long: {len(raw):,} characters where its schema allows at most "
        f"{allowed:,} ({len(raw) - allowed:,} over)"
    )


def longest_json(schema: dict[str, Any]) -> int | None:
    """Return the most characters a JSON value of `schema` can take, or None when unbounded."""
    defs = schema.get("$defs", {}) | schema.get("definitions", {})

    def size(node: Any, depth: int) -> int | None:
        if not isinstance(node, dict) or depth > 32:
            return None
        if "$ref" in node:
            return size(defs.get(node["$ref"].rsplit("/", 1)[-1]), depth + 1)
        if "const" in node:
            return len(json.dumps(node["const"]))
        if "enum" in node:
            return max((len(json.dumps(v)) for v in node["enum"]), default=0)
        options = node.get("anyOf") or node.get("oneOf") or node.get("allOf")
        if options:
            return _largest(size(option, depth + 1) for option in options)
        kinds = node.get("type")
        if isinstance(kinds, list):
            return _largest(size(node | {"type": kind}, depth) for kind in kinds)
        if kinds == "string":
            bound = node.get("maxLength")
            return None if bound is None else 6 * bound + 2
        if kinds in ("number", "integer"):
            return 32
        if kinds in ("boolean", "null"):
            return 5
        if kinds == "array":
            item, count = size(node.get("items", {}), depth + 1), node.get("maxItems")
            return None if item is None or count is None else 2 + count * (item + 2)
        if kinds == "object":
            properties = node.get("properties") or {}
            if not properties:
                return None
            parts = [size(value, depth + 1) for value in properties.values()]
            if None in parts:
                return None
            keys = sum(len(json.dumps(key)) + 4 for key in properties)
            return 2 + keys + sum(p for p in parts if p is not None)
        return None

    return size(schema, 0)


def _largest(sizes: Any) -> int | None:
    found = list(sizes)
    return None if not found or None in found else max(found)


def json_instruction(schema: type[BaseModel] | dict[str, Any]) -> str:
    """Return the plain-text instruction used where a model has no structured-output mode."""
    as_json = schema if isinstance(schema, dict) else schema.model_json_schema()
    return "Reply with one JSON object and nothing else, matching this JSON schema:\n" + json.dumps(
        as_json
    )


def parse_json_reply(schema: type[Schema], raw: str, message: AIMessage | None = None) -> Schema:
    """Parse a model's JSON reply into `schema`, tolerating code fences and chatter around it.

    A reply must be whole JSON and answer the schema: LangChain's parser completes JSON cut
    short (`{"a": 1, "b` reads as `{"a": 1}`), and an object with none of the schema's fields
    validates against a schema whose fields all have defaults, so either would pass half an
    answer or another question's answer off as "nothing found", with no error in the trace.

    Raises:
        UnparsedReply: the reply is longer than any the schema allows, not whole JSON, or has
            none of the schema's fields.
        ValidationError: the JSON breaks the schema.
    """
    over = over_long(schema.model_json_schema(), raw)
    if over is not None:
        raise UnparsedReply(over, clip(raw, SHOWN_OVER_LONG), message)
    parsed = message.additional_kwargs.get("_parsed") if message is not None else None
    if isinstance(parsed, schema):
        return parsed
    data = first_json_object(raw)
    if data is None:
        what = "is not whole JSON" if "{" in raw else "has no JSON object"
        raise UnparsedReply(f"the reply {what}", raw, message)
    if isinstance(parsed, dict):
        data = parsed  # the client's own reading of the same (whole) text
    fields = set(schema.model_fields)
    if isinstance(data, dict) and data and fields and not fields & set(data):
        raise UnparsedReply(
            f"the reply has none of the fields asked for ({', '.join(sorted(fields))}); "
            f"it gave {', '.join(sorted(map(str, data))[:5])}",
            raw,
            message,
        )
    return schema.model_validate(data)


def first_json_object(text: str) -> dict[str, Any] | None:
    """Return the JSON object that opens at the first `{` of `text`, if it is whole.

    Code fences and chatter before or after it are allowed; an object cut short is None (an
    object nested in it is not taken for the reply).
    """
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class UnparsedReply(ValueError):
    """The endpoint answered, but not in the schema asked for; `raw` is what it said."""

    def __init__(self, message: str, raw: str, reply: AIMessage | None = None):
        super().__init__(message)
        self.raw = raw
        self.message = reply


def reply_text(message: AIMessage | None) -> str:
    """Return a reply's text (content that is not a string as JSON)."""
    if message is None:
        return ""
    if not message.content and message.tool_calls:
        # Function calling: what the model said is the call's arguments, not the empty content.
        return json.dumps(message.tool_calls[0].get("args", {}), ensure_ascii=False)
    return message.content if isinstance(message.content, str) else json.dumps(message.content)


def add_usage(total: dict[str, int], message: AIMessage | None) -> None:
    """Add a reply's token counts to `total`."""
    for key, value in ((message.usage_metadata or {}) if message is not None else {}).items():
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


@dataclass
class Reply:
    """One structured model call: what came back and what it cost."""

    value: BaseModel | None
    raw: str
    model: str
    latency_s: float
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    started: float = 0.0
    """Wall-clock time (epoch seconds) the call left quorum, after any concurrency wait."""
    prompt: list[dict[str, str]] = field(default_factory=list)
    """The messages sent, as role and content (traces show what the model was asked)."""
    temperature: float | None = None
    method: str | None = None
    """The structured-output method an endpoint was asked with, when negotiation changed it."""
    endpoint: str | None = None
    """Where the call went: the endpoint's URL (no credentials), or "local model"."""
    retries: int = 0
    """Tries after the first: the endpoint was busy or the connection lost (models/retries.py)."""

    def record(self, node: str) -> dict[str, Any]:
        """Return the call as a JSON-able trace entry."""
        shown = {"method": self.method} if self.method else {}
        if self.endpoint:
            shown["endpoint"] = self.endpoint
        if self.retries:
            shown["retries"] = self.retries
        return shown | {
            "node": node,
            "model": self.model,
            "prompt": self.prompt,
            "temperature": self.temperature,
            "started": round(self.started, 4),
            "latency_s": round(self.latency_s, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "raw": self.raw,
            "error": self.error,
        }
