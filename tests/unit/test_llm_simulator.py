"""The simulated OpenAI endpoint: schema instances, real clients against it, concurrency, errors."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request
from enum import StrEnum
from typing import Literal

import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from infra.structured import json_instruction
from lab.simulate.server import (
    FAULT_KINDS,
    FaultPlan,
    SimulatedEndpoint,
    request_key,
    schema_instance,
    token_logprob,
)


class Stance(StrEnum):
    support = "support"
    refute = "refute"


class Citation(BaseModel):
    pmid: str = Field(max_length=12, description="PubMed id")
    quote: str | None = None
    stance: Stance = Stance.support


class Answer(BaseModel):
    """An answer with its evidence."""

    kind: Literal["yes", "no"]
    labels: list[Literal["a", "b", "c"]] = Field(max_length=2)
    summary: str = Field(min_length=20, max_length=40)
    confidence: float = Field(ge=0, le=1)
    score: float = Field(gt=2, lt=3)
    rank: int = Field(gt=3, le=10)
    cites: list[Citation] = Field(min_length=2)
    by_pmid: dict[str, Citation] = {}
    note: str | None = None
    fixed: Literal["only"] = "only"


class Tree(BaseModel):
    name: str
    children: list[Tree] = []
    parent: Tree | None = None


class Empty(BaseModel):
    tags: list[str] = Field(max_length=0)
    pair: tuple[int, str]


@pytest.mark.parametrize("model", [Answer, Citation, Tree, Empty])
def test_schema_instance_validates(model):
    instance = schema_instance(model.model_json_schema())
    model.model_validate(instance)
    assert instance == schema_instance(model.model_json_schema())  # deterministic


def test_schema_instance_fills_every_field_within_bounds():
    instance = schema_instance(Answer.model_json_schema())
    assert instance["kind"] == "yes" and instance["fixed"] == "only"
    assert instance["labels"] == ["a"] and len(instance["cites"]) == 2
    assert instance["confidence"] == 0.9 and 2 < instance["score"] < 3 and instance["rank"] == 4
    assert 20 <= len(instance["summary"]) <= 40 and instance["summary"].startswith("simulated")
    assert instance["note"] == "simulated"  # optional fields are filled too
    assert instance["cites"][0]["stance"] == "support"
    assert schema_instance(Answer.model_json_schema(), numbers=5.0)["confidence"] == 1.0


def test_schema_instance_handles_raw_shapes():
    assert schema_instance({"type": ["null", "integer"], "minimum": 7}) == 7
    assert schema_instance({"type": "integer", "maximum": -2}) == -2
    assert schema_instance({"allOf": [{"$ref": "#/$defs/A"}], "$defs": {"A": {"const": 3}}}) == 3
    legacy = {"definitions": {"B": {"type": "boolean"}}, "oneOf": [{"$ref": "#/definitions/B"}]}
    assert schema_instance(legacy) is True
    assert schema_instance({"type": "string", "maxLength": 3}) == "sim"
    assert schema_instance({"type": "array", "items": {"type": "null"}}) == [None]
    assert schema_instance({"type": "array", "items": {}}) == []
    assert schema_instance({"type": "array", "minItems": 2}) == [None, None]


def test_json_schema_method_returns_a_valid_instance():
    with SimulatedEndpoint(0.0) as endpoint:
        llm = ChatOpenAI(model="m1", base_url=endpoint.base_url, api_key="x")
        bound = llm.with_structured_output(Answer, method="json_schema", include_raw=True)
        out = bound.invoke([HumanMessage(content="Is it? " * 40)])
    assert out["parsing_error"] is None and isinstance(out["parsed"], Answer)
    assert out["parsed"].confidence == 0.9
    usage = out["raw"].usage_metadata
    assert usage["input_tokens"] == len("Is it? " * 40) // 4 and usage["output_tokens"] > 10
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert endpoint.stats.calls == 1 and endpoint.stats.by_model == {"m1": 1}


def test_function_calling_method_returns_a_valid_instance():
    with SimulatedEndpoint(0.0) as endpoint:
        llm = ChatOpenAI(model="m2", base_url=endpoint.base_url, api_key="x")
        bound = llm.with_structured_output(Answer, method="function_calling", include_raw=True)
        out = bound.invoke("question")
    assert out["parsing_error"] is None and isinstance(out["parsed"], Answer)
    with SimulatedEndpoint(0.0) as endpoint:
        llm = ChatOpenAI(model="m2", base_url=endpoint.base_url, api_key="x")
        tree = llm.with_structured_output(Tree, method="function_calling").invoke("q")
    assert isinstance(tree, Tree)  # langchain sends the recursive $ref as `items: {}`
    raw = out["raw"]
    assert raw.tool_calls[0]["name"] == "Answer" and raw.usage_metadata["output_tokens"] > 0


def test_json_mode_instantiates_a_schema_written_in_the_messages():
    messages = [SystemMessage(content=json_instruction(Citation)), HumanMessage(content="go")]
    with SimulatedEndpoint(0.0) as endpoint:
        llm = ChatOpenAI(model="m3", base_url=endpoint.base_url, api_key="x")
        with_schema = llm.with_structured_output(Citation, method="json_mode", include_raw=True)
        out = with_schema.invoke(messages)
        plain = llm.bind(response_format={"type": "json_object"}).invoke("no schema here")
        text = llm.invoke("hello")
    assert isinstance(out["parsed"], Citation) and out["parsed"].pmid == "simulated"
    assert plain.content == "{}" and text.content == "simulated"


async def test_concurrent_calls_overlap():
    with SimulatedEndpoint(0.3) as endpoint:
        models = [
            ChatOpenAI(model=name, base_url=endpoint.base_url, api_key="x").with_structured_output(
                Citation, method="json_schema"
            )
            for name in ("m1", "m2")
        ]
        results = await asyncio.gather(*(models[i % 2].ainvoke("q") for i in range(8)))
    assert all(isinstance(r, Citation) for r in results)
    assert endpoint.stats.calls == 8 and endpoint.stats.max_in_flight >= 4
    assert endpoint.stats.by_model == {"m1": 4, "m2": 4}
    assert endpoint.stats.in_flight == 0


def test_completions_echo_prompt_logprobs():
    with SimulatedEndpoint(0.0) as endpoint:
        client = openai.OpenAI(base_url=endpoint.base_url, api_key="x")
        done = client.completions.create(
            model="scorer", prompt="a b c", echo=True, logprobs=1, max_tokens=0
        )
        assert [m.id for m in client.models.list()] == ["simulated"]
    choice = done.choices[0]
    assert choice.text == "a b c"
    assert choice.logprobs.tokens == ["a", "b", "c"]
    assert choice.logprobs.token_logprobs == [None, token_logprob("b"), token_logprob("c")]
    assert all(lp < 0 for lp in choice.logprobs.token_logprobs[1:])
    assert endpoint.stats.completions == 1 and endpoint.stats.calls == 0


def _post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_errors_and_shutdown():
    with SimulatedEndpoint(0.0) as endpoint:
        chat = endpoint.base_url + "/chat/completions"
        stream = json.dumps({"model": "m", "prompt": "a", "stream": True}).encode()
        status, body = _post(endpoint.base_url + "/completions", stream)
        assert status == 400 and "streams chat completions only" in body["error"]["message"]
        assert _post(chat, b"{not json")[0] == 400
        bad_ref = {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/$defs/Gone"}}}
        request = {"model": "m", "messages": [], "response_format": bad_ref}
        status, body = _post(chat, json.dumps(request).encode())
        assert status == 400 and "Gone" in body["error"]["message"]
        assert _post(endpoint.base_url + "/embeddings", b"{}")[0] == 404
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(endpoint.base_url + "/nothing")
        assert missing.value.code == 404
        port = int(endpoint.base_url.rsplit(":", 1)[1].split("/")[0])
    assert endpoint.stats.calls == 1 and endpoint.stats.in_flight == 0
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass


def _chat(url: str, **extra) -> tuple[int, dict, dict]:
    """POST one chat completion asking for a Citation; return status, body and headers."""
    schema = {"type": "json_schema", "json_schema": {"schema": Citation.model_json_schema()}}
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "response_format": schema}
    request = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body | extra).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def _only(kind: str, **extra) -> FaultPlan:
    return FaultPlan(**dict.fromkeys(FAULT_KINDS, 0.0) | {kind: 1.0}, **extra)


def test_server_errors_and_rate_limits_are_openai_style_errors():
    with SimulatedEndpoint(0.0, faults=_only("server_error")) as endpoint:
        replies = [_chat(endpoint.base_url) for _ in range(3)]
    assert [status for status, _, _ in replies] == [500, 502, 503]
    assert all(body["error"]["type"] == "server_error" for _, body, _ in replies)
    with SimulatedEndpoint(0.0, faults=_only("rate_limit")) as endpoint:
        status, body, headers = _chat(endpoint.base_url)
    assert status == 429 and headers["Retry-After"] == "0"
    assert body["error"]["type"] == "rate_limit_error"
    assert endpoint.stats.calls == 0  # refused requests are not answered calls
    assert endpoint.fault_counts() == dict.fromkeys(FAULT_KINDS, 0) | {"rate_limit": 1}


def test_a_timeout_fault_answers_normally_but_late():
    with SimulatedEndpoint(0.0, faults=_only("timeout", timeout_sleep_s=0.3)) as endpoint:
        started = time.monotonic()
        status, body, _ = _chat(endpoint.base_url)
    assert time.monotonic() - started >= 0.3
    assert status == 200
    Citation.model_validate_json(body["choices"][0]["message"]["content"])
    assert endpoint.stats.calls == 1


def test_malformed_outputs_alternate_invalid_json_and_a_schema_violation():
    with SimulatedEndpoint(0.0, faults=_only("malformed")) as endpoint:
        contents = [_chat(endpoint.base_url)[1]["choices"][0]["message"]["content"] for _ in "ab"]
        tool = {"type": "function", "function": {"name": "Citation", "parameters": {}}}
        called = _chat(endpoint.base_url, tools=[tool], tool_choice="required")[1]
    with pytest.raises(json.JSONDecodeError):
        json.loads(contents[0])
    broken = json.loads(contents[1])
    assert set(broken) == {"pmid", "quote", "stance"}  # every field there, each of a wrong type
    with pytest.raises(ValueError):
        Citation.model_validate(broken)
    arguments = called["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)  # the third malformed reply: invalid JSON again, in a tool call
    faults = endpoint.faults_injected
    assert [f["request"] for f in faults] == [1, 2, 3]
    assert [f["variant"] for f in faults] == ["invalid_json", "schema_violation", "invalid_json"]
    assert {f["kind"] for f in faults} == {"malformed"} and {f["model"] for f in faults} == {"m"}
    assert "simulated fault 2" in contents[1]


def test_empty_outputs_and_fault_records():
    with SimulatedEndpoint(0.0, faults=_only("empty")) as endpoint:
        status, body, _ = _chat(endpoint.base_url)
    assert status == 200 and body["choices"][0]["message"]["content"] == ""
    (fault,) = endpoint.faults_injected
    assert fault["kind"] == "empty" and fault["request"] == 1 and fault["retry"] == 0
    assert fault["key"] == request_key(["q"]) == endpoint.requests[0]["key"]
    assert time.time() - fault["at"] < 60


def test_no_plan_injects_nothing():
    with SimulatedEndpoint(0.0) as endpoint:
        assert all(_chat(endpoint.base_url)[0] == 200 for _ in range(20))
    assert endpoint.faults_injected == [] and len(endpoint.requests) == 20
    assert endpoint.fault_counts() == dict.fromkeys(FAULT_KINDS, 0)


class Simulated(BaseModel):
    """A schema the simulator answers with its minimal instance (strings "simulated")."""

    answer: str = Field(max_length=40)
    confidence: float = Field(ge=0, le=1)


# langchain-openai (1.7.3 and 1.7.4) dumps the openai SDK's streamed chunk whose `parsed` is
# typed None but holds the pydantic answer (langchain-ai/langchain#35538, fixed only where it
# does not stream). quorum passes its schemas as dicts, which streams without it.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
async def test_streamed_chat_arrives_in_chunks_and_parses():
    from langchain_openai import ChatOpenAI

    with SimulatedEndpoint(0.0) as endpoint:
        llm = ChatOpenAI(model="m", base_url=endpoint.base_url, api_key="x", streaming=True)
        chunks = [c async for c in llm.astream("hi")]
        assert len(chunks) > 2 and "".join(c.content for c in chunks) == "simulated"
        bound = llm.with_structured_output(Simulated, method="json_schema")
        parsed = [p async for p in bound.astream("hi")]
        assert parsed[-1] == Simulated(answer="simulated", confidence=0.9)
        tools = llm.with_structured_output(Simulated, method="function_calling")
        assert await tools.ainvoke("hi") == Simulated(answer="simulated", confidence=0.9)


async def test_quorums_streamed_structured_call_raises_no_serializer_warning():
    import warnings

    from infra.models.providers import _ask_structured

    with SimulatedEndpoint(0.0) as endpoint:
        llm = ChatOpenAI(model="m", base_url=endpoint.base_url, api_key="x", streaming=True)
        shown = []
        for schema in (Simulated.model_json_schema(), Simulated):  # quorum's dict; the control
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                reply = await _ask_structured(llm, schema, [HumanMessage("hi")], "json_schema")
            assert reply["parsing_error"] is None
            shown.append([w for w in caught if "serializer" in str(w.message)])
    assert shown[0] == [] and shown[1] != []  # the pydantic class (control) warns on a terminal
