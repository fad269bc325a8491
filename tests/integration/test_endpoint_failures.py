"""Endpoints that misbehave, named by what they did; busy ones retried without losing members.

Every server here is tests/support/lying_endpoint.py: stdlib, HTTP/1.1, connections kept alive.
"""

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from infra.models import ModelPool
from infra.models.retries import RETRY_BUDGET_S
from infra.settings import ModelSpec
from infra.structured import REPLY_SLACK
from nodes.context import Context
from nodes.ensemble import ensemble
from tests.support.lying_endpoint import LIES, Lie, always, every, serve_stub

HI = [HumanMessage(content="Is it so?")]
QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"
KEY_ENV = "QUORUM_TEST_STUB_KEY"


class Verdict(BaseModel):
    answer: str


def stub_settings(settings, url, **spec):
    model = ModelSpec(provider="openai", model="m", base_url=url, **spec)
    models = settings.models.model_copy(
        update={"query": model, "ensemble": [model], "cache": "off"}
    )
    return settings.model_copy(update={"models": models})


def ask_once(settings, url, **spec):
    model = ModelPool(stub_settings(settings, url, **spec)).first("query")
    return asyncio.run(model.structured(Verdict, HI))


@pytest.mark.parametrize(
    ("lie", "said", "tries"),
    [
        ("html", "answered with a web page, not a chat completion; is base_url the API root", 1),
        ("not_found", "no chat completions at {url}/chat/completions (HTTP 404); is base_url", 1),
        ("unauthorized", f"the key in {KEY_ENV} was refused (HTTP 401: Invalid API key)", 1),
        ("forbidden", f"the key in {KEY_ENV} was refused (HTTP 403", 1),
        ("not_json", "answered with text that is not JSON ('OK, here is my answer: yes')", 1),
        ("wrong_shape", "JSON that is not a chat completion: no `choices` (its keys: result", 1),
        ("no_choices", "`choices` is empty: the server returned no answer", 1),
        ("empty", "answered HTTP 200 with an empty body", 1),
        ("error_as_200", "an error under HTTP 200 ('model is loading')", 1),
        ("truncated", "answered with JSON that breaks off or is malformed", 1),
        # Another try may cure these: tried again (max_retries 1), then named.
        ("cut", "the server closed the connection before its reply was whole (peer closed", 2),
        ("hang_up", "the server closed the connection before its reply was whole (Server", 2),
        ("server_error", "the server failed (HTTP 500: internal error); gave up after 2 tries", 2),
        ("rate_limited", "rate limited (HTTP 429, Retry-After 0 s: slow down); gave up after", 2),
        ("slow", "no reply within 1 s (timeout_s); a server that answers one request at a", 2),
    ],
)
def test_a_misbehaving_endpoint_is_named_by_what_it_did(settings, monkeypatch, lie, said, tries):
    monkeypatch.setenv(KEY_ENV, "sk-stub-0123456789")
    with serve_stub(lie=always(lie)) as stub:
        reply = ask_once(settings, stub.base_url, api_key_env=KEY_ENV, max_retries=1, timeout_s=1.0)
    assert reply.value is None
    assert said.format(url=stub.base_url) in reply.error
    assert "\n" not in reply.error and "sk-stub" not in reply.error
    assert "Error" not in reply.error  # no library's type name: what the server did
    assert stub.answered() == tries


def stub_context(settings, index, embedder, url, **spec):
    chosen = stub_settings(settings, url, **spec)
    return Context(settings=chosen, search=index, embedder=embedder, models=ModelPool(chosen))


def ensemble_state(index):
    return {"question": QUESTION, "qtype": "yesno", "organized": index.fetch(["101", "102", "103"])}


@pytest.mark.parametrize("lie", ["rate_limited", "server_error"])
async def test_every_member_answers_when_every_other_call_is_refused(
    settings, index, embedder, lie
):
    with serve_stub(lie=every(2, lie)) as stub:
        ctx = stub_context(settings, index, embedder, stub.base_url)
        update = await ensemble(ensemble_state(index), Runtime(context=ctx))
    members = update["members"]
    assert len(members) == 5 and all(m["error"] is None for m in members), members
    refused = sum(1 for n in range(1, stub.answered() + 1) if n % 2 == 0)
    assert refused >= 2  # the stub did refuse, and the calls that met it were tried again
    assert sum(c.get("retries", 0) for c in update["calls"]) == refused


async def test_a_member_whose_budget_is_spent_is_named_with_why(settings, index, embedder):
    # A server that asks for more patience than the budget allows: no wait is begun.
    patient = Lie(429, b'{"error": {"message": "quota"}}', headers={"Retry-After": "600"})
    with serve_stub(lie=lambda n: patient if n % 2 else None) as stub:
        ctx = stub_context(settings, index, embedder, stub.base_url)
        update = await ensemble(ensemble_state(index), Runtime(context=ctx))
    failed = [m for m in update["members"] if m["error"] is not None]
    assert failed and all(m["model"] == "m" for m in failed)
    for member in failed:
        assert member["error"].startswith("rate limited (HTTP 429, Retry-After 600 s: quota)")
        assert (
            f"the server asked to wait 600 s, past the {RETRY_BUDGET_S:g} s retry"
            in member["error"]
        )


class Short(BaseModel):
    answer: str = Field(max_length=100)


def huge_completion(n: int) -> Lie:
    message = {"role": "assistant", "content": json.dumps({"answer": "CFTR " * (n // 5)})}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return Lie(
        body=json.dumps({"id": "x", "object": "chat.completion", "choices": [choice]}).encode()
    )


def test_a_200000_character_reply_is_a_failed_call_named_over_long(settings):
    with serve_stub(lie=always_this(huge_completion(200_000))) as stub:
        model = ModelPool(stub_settings(settings, stub.base_url)).first("query")
        reply = asyncio.run(model.structured(Short, HI))
    assert reply.value is None
    said = json.dumps({"answer": "CFTR " * 40_000})
    allowed = 2 + (8 + 4) + (6 * 100 + 2) + REPLY_SLACK
    assert reply.error == (
        f"unparseable output: the reply is over-long: {len(said):,} characters where its schema "
        f"allows at most {allowed:,} ({len(said) - allowed:,} over)"
    )
    assert reply.raw == said[:1999] + "…"  # its start in the record, not 200 kB


def always_this(lie: Lie):
    return lambda n: lie


def test_a_call_tried_again_whose_reply_does_not_parse_still_counts_its_retries(settings):
    # The trace and `quorum bench faults` read a call's retries: a 500 tried again and then
    # answered with prose was recorded as asked once, so the drill could not explain the 500.
    message = {"role": "assistant", "content": "Yes, it is so."}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    prose = Lie(
        body=json.dumps({"id": "x", "object": "chat.completion", "choices": [choice]}).encode()
    )
    with serve_stub(lie=lambda n: LIES["server_error"] if n == 1 else prose) as stub:
        reply = ask_once(settings, stub.base_url, max_retries=2)
    assert reply.value is None and reply.error.startswith("unparseable output"), reply.error
    assert stub.answered() == 2 and reply.retries == 1


def streaming_model(settings, url):
    model = ModelPool(stub_settings(settings, url, max_retries=0)).first("query")
    model.llm.streaming = True  # as in chat and on the page, where LangGraph streams every call
    return model


def test_a_server_that_ignores_stream_is_asked_for_whole_replies_from_then_on(settings):
    with serve_stub(ignore_stream=True) as stub:
        model = streaming_model(settings, stub.base_url)

        async def twice():
            return [await model.structured(Verdict, HI) for _ in range(2)]

        replies = asyncio.run(twice())
    assert [r.error for r in replies] == [None, None]
    # The first call was streamed, answered whole, and asked again; the second asked whole.
    assert [bool(r.get("stream")) for r in stub.requests] == [True, False, False]


def test_a_stream_with_no_completion_in_it_is_named(settings):
    done_only = Lie(body=b"data: [DONE]\n\n", content_type="text/event-stream")
    with serve_stub(lie=lambda n: done_only) as stub:
        reply = asyncio.run(streaming_model(settings, stub.base_url).structured(Verdict, HI))
    assert reply.error == "answered a streamed request with events that hold no chat completion"


def test_a_stream_that_falls_silent_is_a_timeout_worded_and_tried_again(settings):
    from infra.models.failures import describe, transient

    # The model's timeout_s bounds a stream's silence too, not langchain-openai's own 120 s.
    model = ModelPool(stub_settings(settings, "http://h/v1", timeout_s=300)).first("query")
    assert model.llm.stream_chunk_timeout == 300

    silent = TimeoutError(
        "No streaming chunk received for 120.0s"
    )  # langchain-openai's, a subclass
    assert transient(silent) == "lost"
    assert describe(silent, url="http://h/v1", key_env=None, timeout_s=300).startswith(
        "no streamed text within 300 s (timeout_s); a server that answers one request at a time"
    )
