"""An endpoint that refuses json_schema (llama-cpp-python's server) is asked another way, once."""

import json

from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from infra.models import ModelPool
from infra.settings import ModelSpec, load_settings
from infra.simulate.server import SimulatedEndpoint
from tests.support.cli import run_quorum, simulated_env

QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"


class Verdict(BaseModel):
    answer: str = Field(max_length=40)
    confidence: float = Field(ge=0, le=1)


def pool(settings, url: str, model: str) -> ModelPool:
    spec = ModelSpec(provider="openai", model=model, base_url=url, max_retries=0)
    return ModelPool(load_settings(home=settings.home, models={"query": spec, "ensemble": [spec]}))


async def test_a_refused_json_schema_is_asked_again_with_function_calling_and_remembered(settings):
    with SimulatedEndpoint(0.0, refuse_json_schema=True) as endpoint:
        model = pool(settings, endpoint.base_url, "refuses-1").first("query")
        first = await model.structured(Verdict, [HumanMessage(content="yes or no?")])
        assert first.error is None and first.value is not None
        record = first.record("query")
        assert record["method"].startswith("function_calling (json_schema refused")
        assert "Input should be 'text' or 'json_object'" in record["method"]
        assert json.loads(record["raw"]) == first.value.model_dump()  # the tool call's arguments
        answered = endpoint.stats.calls
        second = await model.structured(Verdict, [HumanMessage(content="again?")])
        assert second.error is None
        assert endpoint.stats.calls == answered + 1  # straight to function calling: no refusal


async def test_an_endpoint_that_accepts_json_schema_keeps_it(settings):
    with SimulatedEndpoint(0.0) as endpoint:
        model = pool(settings, endpoint.base_url, "accepts-1").first("query")
        reply = await model.structured(Verdict, [HumanMessage(content="yes or no?")])
        assert reply.error is None and "method" not in reply.record("query")


def test_ask_answers_through_an_endpoint_that_refuses_json_schema(quorum_home):
    with SimulatedEndpoint(0.0, refuse_json_schema=True) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off")
        proc = run_quorum(env, "ask", QUESTION, "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ideal_answer"] and not result["ideal_answer"].startswith("Insufficient")
    assert "json_schema refused" in proc.stderr  # said once, on stderr


def test_ask_exits_non_zero_with_the_servers_words_when_every_model_fails(quorum_home):
    with SimulatedEndpoint(0.0, refuse_json_schema=True) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off")
    # The endpoint is gone now: every call is refused at the socket.
    proc = run_quorum(env, "ask", QUESTION, timeout=300)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("quorum: error: no answer: no model could answer")
    assert "Connection error" in last
    assert "Insufficient evidence" in proc.stdout
