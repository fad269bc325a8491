"""The simulated OpenAI endpoint: schema instances, real clients against it, concurrency, errors."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request
from enum import StrEnum
from typing import Literal

import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from infra.llm_simulator import SimulatedEndpoint, schema_instance, token_logprob
from infra.models import json_instruction


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
        stream = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
        status, body = _post(chat, stream)
        assert status == 400 and "stream" in body["error"]["message"]
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
