"""Models behind a real OpenAI-compatible HTTP endpoint (the local simulator): structured
output, retries on 429, the rate limiter, prompt log-probabilities for MoI, the response cache,
and the whole graph's concurrency as `quorum bench pipeline` measures it."""

import asyncio
import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel

from infra.models import ModelPool, endpoint_limit
from infra.settings import ModelSpec
from lab.bench.batch import bench_batch
from lab.bench.pipeline import bench_pipeline, chain_length
from lab.simulate.server import SimulatedEndpoint
from nodes.context import Context
from nodes.ensemble import StrategyUnavailable, ensemble

HI = [HumanMessage(content="Is it so?")]
FIXTURES = Path(__file__).parents[1] / "fixtures"
QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"


class Verdict(BaseModel):
    answer: str
    confidence: float


def endpoint_settings(settings, url, *, ensemble_models=2, **spec):
    def one(name):
        return ModelSpec(provider="openai", model=name, base_url=url, **spec)

    models = settings.models.model_copy(
        update={
            "query": one("q"),
            "ensemble": [one(f"e{i}") for i in range(ensemble_models)],
        }
    )
    return settings.model_copy(update={"models": models})


async def test_retries_a_rate_limited_call_then_succeeds(settings):
    with SimulatedEndpoint(0.0, fail_first=2) as endpoint:
        chosen = endpoint_settings(settings, endpoint.base_url, max_retries=3)
        model = ModelPool(chosen).first("query")
        reply = await model.structured(Verdict, HI)
        assert reply.error is None and reply.value.confidence == 0.9
        assert endpoint.rejected == 2 and endpoint.stats.calls == 1


async def test_a_call_that_keeps_failing_is_an_error_reply_not_an_exception(settings):
    with SimulatedEndpoint(0.0, fail_first=10) as endpoint:
        chosen = endpoint_settings(settings, endpoint.base_url, max_retries=1)
        reply = await ModelPool(chosen).first("query").structured(Verdict, HI)
        assert reply.value is None and reply.error.startswith("rate limited (HTTP 429")
        assert endpoint.rejected == 2  # the call and its one retry


async def test_rate_limiter_spaces_requests(settings):
    with SimulatedEndpoint(0.0) as endpoint:
        chosen = endpoint_settings(settings, endpoint.base_url, requests_per_second=20)
        model = ModelPool(chosen).first("query")
        began = time.perf_counter()
        replies = await asyncio.gather(
            *(model.structured(Verdict, HI, temperature=1.0) for _ in range(6))
        )
        assert all(r.error is None for r in replies) and endpoint.stats.calls == 6
        # A 20/s token bucket of size 1 lets one request through every 50 ms: six need ≥ 0.25 s
        # (a lower bound on correct behaviour, not a speed target).
        assert time.perf_counter() - began >= 0.2


async def test_greedy_calls_are_cached_across_pools_and_sampled_calls_are_not(settings):
    with SimulatedEndpoint(0.0) as endpoint:
        chosen = endpoint_settings(settings, endpoint.base_url)
        first = await ModelPool(chosen).first("query").structured(Verdict, HI, temperature=0.0)
        again = await ModelPool(chosen).first("query").structured(Verdict, HI, temperature=0.0)
        assert endpoint.stats.calls == 1 and again.value == first.value
        await ModelPool(chosen).first("query").structured(Verdict, HI, temperature=1.0)
        await ModelPool(chosen).first("query").structured(Verdict, HI, temperature=1.0)
        assert endpoint.stats.calls == 3
        other = ModelPool(chosen).role("ensemble")[0]  # another model: its own entries
        await other.structured(Verdict, HI, temperature=0.0)
        assert endpoint.stats.calls == 4
        off = chosen.model_copy(
            update={"models": chosen.models.model_copy(update={"cache": "off"})}
        )
        await ModelPool(off).first("query").structured(Verdict, HI, temperature=0.0)
        assert endpoint.stats.calls == 5
    assert settings.llm_cache_path.exists()


def endpoint_context(settings, index, embedder, url, **ensemble):
    chosen = endpoint_settings(settings, url, prompt_logprobs=True)
    chosen = chosen.model_copy(update={"ensemble": chosen.ensemble.model_copy(update=ensemble)})
    return Context(settings=chosen, search=index, embedder=embedder, models=ModelPool(chosen))


async def test_moi_observes_3n_random_orders_per_model_then_answers_once(settings, index, embedder):
    # The wiring over HTTP; what the fit recovers is held against the planted reader in
    # tests/unit/test_ensemble_planted.py.
    with SimulatedEndpoint(0.0) as endpoint:
        ctx = endpoint_context(
            settings, index, embedder, endpoint.base_url, strategy="moi", contexts=4
        )
        state = {
            "question": QUESTION,
            "qtype": "yesno",
            "organized": index.fetch(["101", "102", "103", "105"]),
        }
        update = await ensemble(state, Runtime(context=ctx))
        # 2 models x (3N random orders + the probe's 2 calls checking echoed log-probabilities)
        assert endpoint.stats.completions == 2 * (12 + 2)
        assert endpoint.stats.calls == 2  # then one answer per model
        fits = update["votes"]["moi"]
        assert len(fits) == 2
        for fit in fits.values():
            assert len(fit["observations"]) == 12 and all(o < 0 for o in fit["observations"])
            assert len({tuple(p) for p in fit["permutations"]}) == 12
            assert abs(sum(fit["position_weights"]) - 1) < 1e-3  # rounded to 4 places
            assert sorted(fit["order"]) == ["101", "102", "103", "105"]
        orders = [m["order"] for m in update["members"]]
        assert orders == [fit["order"] for fit in fits.values()]
        assert update["decision"]["order"] == orders[0]
        assert update["decision"]["settings"]["observed_orders"] == 12
        assert sum(c.get("kind") == "loglikelihood" for c in update["calls"]) == 24


async def test_moi_is_refused_on_a_chat_only_endpoint(settings, index, embedder):
    with SimulatedEndpoint(0.0) as endpoint:
        chosen = endpoint_settings(settings, endpoint.base_url)  # prompt_logprobs off
        chosen = chosen.model_copy(
            update={"ensemble": chosen.ensemble.model_copy(update={"strategy": "moi"})}
        )
        ctx = Context(settings=chosen, search=index, embedder=embedder, models=ModelPool(chosen))
        state = {"question": QUESTION, "qtype": "yesno", "organized": index.fetch(["101", "102"])}
        with pytest.raises(StrategyUnavailable, match="prompt_logprobs"):
            await ensemble(state, Runtime(context=ctx))
        assert endpoint.stats.calls == 0 and endpoint.stats.completions == 0


def test_chain_length_counts_waves_of_overlapping_calls():
    wave = [{"started": 10.0 + i * 0.01, "latency_s": 1.0} for i in range(5)]
    later = [{"started": 11.05, "latency_s": 1.0}, {"started": 12.1, "latency_s": 1.0}]
    assert chain_length(wave) == 1
    assert chain_length(wave + later) == 3
    assert chain_length([]) == 0


def test_bench_pipeline_runs_the_whole_graph_against_the_simulator(quorum_home, tmp_path):
    from infra.settings import load_settings

    # The embedded demo index and the real MiniLM embedder; only the LLMs are simulated. The
    # members' fan-out is what this measures: dedupe, so that they answer the top-m (with
    # CORG, the default for a served model, the unplanted simulator labels every pair a
    # duplicate, and the one passage left is one order, asked once per model).
    base = load_settings(home=quorum_home, organize={"strategy": "dedupe"})
    figures = bench_pipeline(base, latency_s=0.2, models=2, members=3, runs=1)
    assert figures["calls_by_node"]["ensemble"] == 6  # 2 models x 3 views
    assert figures["llm_calls"] == sum(figures["calls_by_node"].values())
    assert figures["failed_calls"] == 0
    # generate_query, organize, ensemble: one wave each; then synthesis and its verifier, one
    # call after the other. The simulator's verifier judges from its members' facts, so it
    # supports its own synthesis at once: nothing is synthesized again (issue 57).
    assert figures["calls_by_node"]["synthesize"] == 2
    assert figures["critical_path_calls"] == 5 and figures["llm_calls"] == 1 + 1 + 6 + 2
    assert figures["max_in_flight"] >= 6
    assert set(figures) >= {"wall_s", "llm_calls", "critical_path_calls", "llm_latency_s"}


def test_the_bound_on_calls_in_flight_is_stated_in_one_place(settings):
    own = ModelSpec(provider="openai", model="m", base_url="http://x/v1", max_concurrency=5)
    unset = own.model_copy(update={"max_concurrency": None})
    local = ModelSpec(provider="local", model="smollm2")
    per_question = settings.ensemble.max_concurrency
    assert endpoint_limit(own, settings, 16) == 5  # the endpoint's own limit wins
    assert endpoint_limit(unset, settings, 1) == per_question
    assert endpoint_limit(unset, settings, 16) == 16 * per_question  # sized for the batch
    assert endpoint_limit(local, settings, 16) == 1


@pytest.mark.parametrize("questions", [1, 3])
async def test_a_batch_keeps_a_bound_per_question_in_flight_not_one_shared(settings, questions):
    with SimulatedEndpoint(0.3) as endpoint:
        chosen = endpoint_settings(settings, endpoint.base_url)
        model = ModelPool(chosen, questions_in_flight=questions).first("query")
        replies = await asyncio.gather(
            *(model.structured(Verdict, HI, temperature=1.0) for _ in range(40))
        )
        assert all(r.error is None for r in replies)
        assert endpoint.stats.max_in_flight == questions * settings.ensemble.max_concurrency


def test_bench_batch_answers_every_question_with_their_calls_overlapped(quorum_home):
    from infra.settings import load_settings

    base = load_settings(home=quorum_home)
    figures = bench_batch(
        base,
        questions=4,
        concurrency=4,
        latency_s=0.2,
        input_path=FIXTURES / "bioasq_eval" / "phase_a_gold.json",
    )
    # Every question ends answered or honestly insufficient (the one door), none failed. The
    # simulator's query ("simulated") finds passages off every question, so the relevance
    # check may refuse every answer: what is measured is that each question went the whole
    # way, not whether the simulator's answer was kept.
    assert figures["answered"] + figures["insufficient"] == figures["questions"] == 4
    # generate_query, organize, ensemble, then synthesis and the verifier (at least one each).
    assert figures["chain_calls"] >= 5
    # Each question made at least the chain's calls: none stopped short of synthesis.
    assert figures["fewest_calls"] >= figures["chain_calls"]
    assert figures["endpoint_limit"] == 4 * base.ensemble.max_concurrency
    # Four questions' ensemble waves overlapped: more in flight than one question makes.
    assert figures["max_in_flight"] > base.ensemble.members
    assert figures["ideal_s"] == pytest.approx(4 / 4 * figures["chain_calls"] * 0.2, abs=0.01)
    assert figures["wall_over_ideal"] == pytest.approx(figures["wall_s"] / figures["ideal_s"], 0.02)
