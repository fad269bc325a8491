"""An endpoint that refuses json_schema (llama-cpp-python's server) is asked another way, once."""

import json
import time

from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from infra.models import ModelPool
from infra.settings import ModelSpec, load_settings
from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import ON_THE_QUESTION, run_quorum, simulated_env

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
        env = simulated_env(
            endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off", **ON_THE_QUESTION
        )
        proc = run_quorum(env, "ask", QUESTION, "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ideal_answer"] and not result["ideal_answer"].startswith("Insufficient")
    assert "json_schema refused" in proc.stderr  # said once, on stderr


def test_an_endpoint_that_is_down_is_named_before_any_search(quorum_home):
    with SimulatedEndpoint(0.0) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off")
        url = endpoint.base_url
    before = json.loads(run_quorum(env, "trace", "list", "--json", timeout=120).stdout)
    # The endpoint is gone now: the check before the first question finds nothing there.
    started = time.perf_counter()
    proc = run_quorum(env, "ask", QUESTION, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith(f"quorum: error: model endpoint {url.rstrip('/')} (model ")
    assert "nothing answers there; start the server" in lines[-1]
    assert not any("searched" in line or "query" in line.lower() for line in lines[:-1])
    assert time.perf_counter() - started < 60  # the interpreter's imports, then 1 probe
    listed = run_quorum(env, "trace", "list", "--json", timeout=120)
    assert json.loads(listed.stdout) == before  # no run was started


def test_a_run_in_which_every_model_fails_prints_no_answer_and_is_failed(quorum_home):
    # The server answers the check, then refuses every completion (429, retried, given up).
    with SimulatedEndpoint(0.0, fail_first=10**6) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off")
        proc = run_quorum(env, "ask", QUESTION, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert proc.stdout == ""  # nothing printed as an answer
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("quorum: error: no answer: no model could answer")
        assert "RateLimitError" in last or "429" in last
        listed = json.loads(run_quorum(env, "trace", "list", "--json", timeout=120).stdout)
    thread = last.rsplit("(thread ", 1)[1].rstrip(")")
    (run,) = [t for t in listed if t["thread_id"] == thread]
    assert (run["status"], run["answer"]) == ("failed", None)
    assert run["error"].startswith("no model could answer")
