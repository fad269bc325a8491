"""Strategies against the reader with planted biases: what each decides, and that it is read.

The reader weighs the passages it is shown by utility × a position curve, reads one, cites and
quotes it verbatim, and scores /completions on the same model, so a strategy wired wrong
(MoI's fit or order unused, CCV's citations unread, the decision ignored by synthesis) gives a
different answer here, which a scripted model that is always right could not show.
"""

from __future__ import annotations

import re

import pytest
from langgraph.runtime import Runtime
from scipy.stats import spearmanr

from infra.bioasq import format_exact
from infra.models import ModelPool
from infra.settings import ModelSpec
from lab.simulate.protocol import token_logprob
from lab.simulate.reader import position_curve
from lab.simulate.server import SimulatedEndpoint
from nodes.context import Context
from nodes.ensemble import StrategyUnavailable, ensemble
from nodes.ensemble.strategies.moi import observation_text
from nodes.synthesize import synthesize
from tests.support.reader import exact_reader

QUESTION = "where is the white house"
GOLD = "Washington, D.C."
PASSAGES = [
    # pmid, role, planted answer, text, the retriever's score (only roughly right)
    ("g", "gold", None, f"The White House stands in {GOLD}, on Pennsylvania Avenue.", 0.82),
    ("d1", "distractor", "New York", "A White House replica stands in New York, at a fair.", 0.9),
    ("d2", "distractor", "Dublin", "The White House design copies Leinster House in Dublin.", 0.7),
    ("i1", "irrelevant", None, "Pennsylvania is a state in the north east.", 0.3),
    ("i2", "irrelevant", None, "Houses are often painted white in the south.", 0.25),
    ("i3", "irrelevant", None, "Avenues are wide streets lined with trees.", 0.1),
]
SHOWN = ["i1", "d1", "i2", "g", "i3", "d2"]  # the rank order the strategies receive


def plants() -> list[dict]:
    items = []
    for pmid, role, answer, text, _ in PASSAGES:
        item = {"pmid": pmid, "role": role, "title": f"Passage {pmid}", "text": text}
        items.append(item | ({"answer": answer} if answer else {}))
    return [{"id": "wh", "question": QUESTION, "answer": GOLD, "passages": items}]


def contexts() -> list[dict]:
    by_id = {p[0]: p for p in PASSAGES}
    return [
        {"pmid": p, "title": f"Passage {p}", "abstract": by_id[p][3], "score": by_id[p][4]}
        for p in SHOWN
    ]


def planted_context(settings, embedder, url, *, synthesis=None, **ensemble_settings):
    spec = ModelSpec(provider="openai", model="reader", base_url=url, prompt_logprobs=True)
    models = settings.models.model_copy(update={"query": spec, "ensemble": [spec]})
    groups = {
        k: ensemble_settings.pop(k) for k in ("ccv", "moi", "cobag") if k in ensemble_settings
    }
    chosen_ensemble = settings.ensemble.model_copy(update=ensemble_settings | {"contexts": 6})
    for name, values in groups.items():
        group = getattr(settings.ensemble, name).model_copy(update=values)
        chosen_ensemble = chosen_ensemble.model_copy(update={name: group})
    chosen = settings.model_copy(
        update={
            "models": models,
            "ensemble": chosen_ensemble,
            "synthesis": settings.synthesis.model_copy(update=synthesis or {}),
        }
    )
    return Context(settings=chosen, search=None, embedder=embedder, models=ModelPool(chosen))


async def decide(ctx, qtype="factoid"):
    state = {"question": QUESTION, "qtype": qtype, "organized": contexts()}
    return state, await ensemble(state, Runtime(context=ctx))


@pytest.mark.parametrize("curve", ["primacy", "u", "recency"])
async def test_moi_recovers_the_planted_bias_and_answers_from_its_order(settings, embedder, curve):
    # order "paired" pinned: the check is that the gold passage lands where this reader
    # reads most, which the paper's descending order does only under primacy.
    with SimulatedEndpoint(0.0, planted=plants(), reader=exact_reader(curve=curve)) as endpoint:
        ctx = planted_context(
            settings, embedder, endpoint.base_url, strategy="moi", moi={"order": "paired"}
        )
        _, update = await decide(ctx)
        reads = [r for r in endpoint.reader.records if r["kind"] == "member"]
    (fit,) = update["votes"]["moi"].values()
    truth = position_curve(curve, 0.8, 6)
    assert spearmanr(fit["position_weights"], truth).statistic >= 0.9
    utility = fit["utilities"]
    assert utility["g"] > max(utility["d1"], utility["d2"])
    assert utility["d1"] == pytest.approx(utility["d2"], abs=1e-3)  # both planted at 0.7
    assert min(utility["d1"], utility["d2"]) > max(utility["i1"], utility["i2"], utility["i3"])
    # The debiased order puts the gold passage where this reader reads most.
    heaviest = max(range(6), key=lambda j: truth[j])
    assert fit["order"][heaviest] == "g"
    # That order is what the member read and what the decision hands on.
    assert update["members"][0]["order"] == fit["order"] == update["decision"]["order"]
    assert [r["shown"] for r in reads] == [fit["order"]]
    settings_ = update["decision"]["settings"]
    assert settings_["permutations"] == "random" and settings_["observed_orders"] == 18
    assert settings_["observation"] == "joint" and settings_["order"] == "paired"
    assert (settings_["members"], settings_["contexts"], settings_["weights"]) == (1, 6, "fitted")
    assert settings_["shown"] == SHOWN  # every passage reached the member, listed in rank order
    assert fit["orientation"] == "retriever prior"


async def test_moi_observations_include_the_passages_own_likelihood(settings, embedder):
    # The paper's s = P(q | π)·P(π): in log terms the question's log-probability after the
    # passages plus the passages' own, which the reader gives token by token.
    with SimulatedEndpoint(0.0, planted=plants(), reader=exact_reader()) as endpoint:
        observed = {}
        for observation in ("joint", "question"):
            ctx = planted_context(
                settings,
                embedder,
                endpoint.base_url,
                strategy="moi",
                moi={"observation": observation},
            )
            _, update = await decide(ctx)
            (fit,) = update["votes"]["moi"].values()
            observed[observation] = fit
    joint, question = observed["joint"], observed["question"]
    assert joint["permutations"] == question["permutations"]
    by_id = {c["pmid"]: c for c in contexts()}
    for order, with_prior, without in zip(
        joint["permutations"], joint["observations"], question["observations"], strict=True
    ):
        # The text MoI scores, as the node renders it (nothing here is long enough to be cut).
        text = observation_text([by_id[p] for p in order], 6000)
        tokens = re.findall(r"\S+", text)
        prior = sum(token_logprob(t) for t in tokens[1:])  # the first token has no context
        assert with_prior == pytest.approx(without + prior, abs=1e-3)


async def test_synthesis_reads_moi_s_order_and_follows_the_decision(settings, embedder):
    with SimulatedEndpoint(0.0, planted=plants(), reader=exact_reader(curve="recency")) as endpoint:
        ctx = planted_context(settings, embedder, endpoint.base_url, strategy="moi")
        state, update = await decide(ctx)
        answer = await synthesize(state | update, Runtime(context=ctx))
        synthesis = [r for r in endpoint.reader.records if r["kind"] == "synthesis"]
    assert synthesis[0]["shown"] == update["decision"]["order"] != SHOWN
    decided = update["decision"]["answers"][0]["answer"]
    assert synthesis[0]["decision"] == [decided]
    assert answer["answer"]["exact"] == [decided] and answer["answer"]["overrode_decision"] is False


async def test_ccv_strict_evidence_accepts_the_reader_s_verbatim_quotes(settings, embedder):
    # The reader quotes the passage it read verbatim; "Washington, D.C." must count as quoted.
    with SimulatedEndpoint(0.0, planted=plants(), reader=exact_reader()) as endpoint:
        ctx = planted_context(
            settings,
            embedder,
            endpoint.base_url,
            strategy="ccv",
            ccv={"members": 8, "evidence": "strict"},
        )
        _, update = await decide(ctx)
    ccv = update["votes"]["ccv"]
    assert ccv["evidence"] == "strict" and all(ccv["valid"])
    assert any(m["answer"] == [GOLD] for m in update["members"])
    top = update["decision"]["answers"][0]
    assert top["cited"][0] == next(r["pmid"] for r in ccv["table"] if r["answer"] == ccv["winner"])
    assert update["decision"]["order"][0] == top["cited"][0]


async def test_vote_mode_answers_the_decision_without_a_synthesis_call(settings, embedder):
    with SimulatedEndpoint(0.0, planted=plants(), reader=exact_reader()) as endpoint:
        ctx = planted_context(
            settings, embedder, endpoint.base_url, strategy="ccv", synthesis={"mode": "vote"}
        )
        state, update = await decide(ctx)
        calls = endpoint.stats.calls
        answer = await synthesize(state | update, Runtime(context=ctx))
        # No synthesis call in vote mode: the one call is the verifier's, reading the decision.
        assert endpoint.stats.calls == calls + 1
        assert [c["node"] for c in answer["calls"]] == ["verify"]
    decided = [a["answer"] for a in update["decision"]["answers"][:5]]
    given = answer["answer"]
    assert given["extracted"] == decided and given["source"] == "decision"
    # The candidates the cited passages carry, in the decision's order: its first among them.
    formatted = format_exact("factoid", decided)
    assert given["exact"] == [e for e in formatted if e not in given["support"]["dropped"]]
    assert given["exact"][:1] == formatted[:1]


def echo_spec(endpoint: SimulatedEndpoint, name: str = "reader") -> ModelSpec:
    return ModelSpec(
        provider="openai", model=name, base_url=endpoint.base_url, prompt_logprobs=True
    )


def moi_context(settings, embedder, specs: list[ModelSpec]) -> Context:
    models = settings.models.model_copy(update={"query": specs[0], "ensemble": specs})
    chosen = settings.model_copy(
        update={
            "models": models,
            "ensemble": settings.ensemble.model_copy(update={"strategy": "moi", "contexts": 6}),
        }
    )
    return Context(settings=chosen, search=None, embedder=embedder, models=ModelPool(chosen))


async def test_moi_drops_a_shifted_server_and_decides_with_the_right_one(settings, embedder):
    state = {"question": QUESTION, "qtype": "factoid", "organized": contexts()}
    with (
        SimulatedEndpoint(0.0, planted=plants(), reader=exact_reader()) as right,
        SimulatedEndpoint(0.0, planted=plants(), reader=exact_reader(), shift_echo=True) as shifted,
    ):
        ctx = moi_context(settings, embedder, [echo_spec(shifted, "llama-cpp"), echo_spec(right)])
        update = await ensemble(state, Runtime(context=ctx))
        assert shifted.stats.completions == 2  # the probe only: no order was scored with it
        alone = moi_context(settings, embedder, [echo_spec(shifted, "llama-cpp")])
        with pytest.raises(StrategyUnavailable, match="shifts them by one token"):
            await ensemble(state, Runtime(context=alone))
    settings_ran = update["decision"]["settings"]
    assert "shifts them by one token" in settings_ran["dropped"]["llama-cpp"]
    (fit,) = update["votes"]["moi"].values()
    assert len(fit["observations"]) == 18  # 3N random orders, all from the right server
    assert [m["model"] for m in update["members"]] == ["reader"]
