"""Minimal, deterministic instances of JSON Schemas — and outputs that break them.

The simulated endpoint answers every structured-output request with one of these, so a
benchmark can run the whole pipeline without a model: pydantic v2 schemas, OpenAI's strict
conversion, and LangChain's function-calling conversion are all handled.
"""

from __future__ import annotations

import math
from typing import Any

PLACEHOLDER = "simulated"
# Past this nesting depth recursive schemas get only what they require, so instances stay finite.
MAX_DEPTH = 8
STRING_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "uri": "https://example.org/simulated",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def schema_violation(schema: dict | None, marker: str) -> Any:
    """Return JSON that breaks `schema`: every property of its instance given a wrong type."""
    instance = schema_instance(schema) if schema else None
    if not isinstance(instance, dict) or not instance:
        return [marker]  # the root wants an object (or anything): an array breaks the former
    return {k: [marker] if isinstance(v, str) else marker for k, v in instance.items()}


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


PROSE = "A simulated answer drawn from the shown abstracts."
"""What a string field named like a paragraph of prose gets: a sentence, as quorum's answer
contract (infra/bioasq/contract.py) asks of an ideal answer; a bare word would be refused."""
PROSE_FIELDS = frozenset({"ideal_answer"})


def _object(schema: dict, defs: dict, numbers: float, depth: int) -> dict:
    properties = schema.get("properties", {})
    required = set(schema.get("required", properties))
    return {
        name: _prose(sub)
        if name in PROSE_FIELDS and sub.get("type") == "string"
        else _instance(sub, defs, numbers, depth + 1)
        for name, sub in properties.items()
        if depth <= MAX_DEPTH or name in required
    }


def _prose(schema: dict) -> str:
    return PROSE[: schema["maxLength"]] if "maxLength" in schema else PROSE


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


MISSING = object()
"""What `fitted` returns for a value no option of an enum accepts."""


def resolved(schema: Any, defs: dict) -> dict:
    """Return a schema with its `$ref`, `allOf` and nullable `anyOf`/`oneOf` taken apart."""
    if not isinstance(schema, dict):
        return {}
    if "$ref" in schema:
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return resolved(_merge(_resolve(schema["$ref"], defs), rest), defs)
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            merged = _merge(merged, resolved(part, defs))
        return merged
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if isinstance(o, dict) and o.get("type") != "null"]
            rest = {k: v for k, v in schema.items() if k != key}
            return resolved(_merge(rest, options[0]), defs) if options else rest
    return schema


def fitted(value: Any, schema: Any, defs: dict, *, numbers: float = 0.9) -> Any:
    """Return `value` shaped to a schema, or `schema_instance`'s value where it cannot be.

    Enum values are matched (case and spaces aside), strings and lists clipped to their
    bounds, numbers clamped. A list given for a string is joined by ", "; a scalar given for
    a list becomes one item; list items no enum option accepts are dropped.
    """
    schema = resolved(schema, defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return _enum_choice(value, schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    kind = kind or _implied_type(schema)
    if kind == "array":
        items = list(value) if isinstance(value, list | tuple) else [value]
        shaped = [fitted(v, schema.get("items", {}), defs, numbers=numbers) for v in items]
        shaped = [v for v in shaped if v is not MISSING]
        if "maxItems" in schema:
            shaped = shaped[: schema["maxItems"]]
        if len(shaped) < schema.get("minItems", 0):
            return _instance(schema, defs, numbers, 0)
        return shaped
    if kind == "string":
        text = ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
        text = text[: schema["maxLength"]] if "maxLength" in schema else text
        return text + "x" * max(0, schema.get("minLength", 0) - len(text))
    if kind in ("number", "integer"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return _instance(schema, defs, numbers, 0)
        if kind == "number":
            return _number(schema, number)
        return _clamped_integer(schema, number)
    if kind == "boolean":
        return bool(value)
    if kind == "object" and isinstance(value, dict):
        base = _instance(schema, defs, numbers, 0) or {}
        properties = schema.get("properties", {})
        return base | {
            k: fitted(v, properties[k], defs, numbers=numbers)
            for k, v in value.items()
            if k in properties
        }
    return value


def _enum_choice(value: Any, options: list) -> Any:
    if isinstance(value, list | tuple):
        found = (_enum_choice(v, options) for v in value)
        return next((v for v in found if v is not MISSING), MISSING)
    if value in options:
        return value
    key = " ".join(str(value).split()).casefold()
    return next((o for o in options if " ".join(str(o).split()).casefold() == key), MISSING)


def _clamped_integer(schema: dict, number: float) -> int:
    value = round(number)
    if "minimum" in schema:
        value = max(value, math.ceil(schema["minimum"]))
    if "exclusiveMinimum" in schema:
        value = max(value, math.floor(schema["exclusiveMinimum"]) + 1)
    if "maximum" in schema:
        value = min(value, math.floor(schema["maximum"]))
    if "exclusiveMaximum" in schema:
        value = min(value, math.ceil(schema["exclusiveMaximum"]) - 1)
    return value
