"""The reader with planted biases, over real HTTP through quorum's own OpenAI client path."""

from __future__ import annotations

import itertools
import json
import math
import random
import threading
import time
import urllib.error
import urllib.request
from typing import Literal

import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field, create_model

from infra.models import ChatModel
from infra.settings import ModelSpec
from lab.simulate.__main__ import main
from lab.simulate.planted import PlantError, Plants
from lab.simulate.reader import READER_HEADER, ReaderSettings
from lab.simulate.server import SimulatedEndpoint
from nodes.passages import passages
from nodes.synthesize import decision_lines
from prompts import render

OLD_UTILITIES = {"distractor_strength": 0.7, "irrelevant_utility": 0.05}
"""The utilities these checks' expected figures were worked out with (the defaults are now
fitted to real models' reading diagnostics: lab/simulate/calibration.py)."""

QUESTION = "who got the first nobel prize in physics"
GOLD = "Wilhelm Conrad Röntgen"
TEXTS = {
    "g": ("Nobel laureates", f"The first Nobel Prize in Physics went to {GOLD} in 1901."),
    "d1": ("Chemistry prize", "Marie Curie won a physics prize in 1903 and a chemistry prize."),
    "d2": (
        "Relativity",
        "Albert Einstein won the physics prize of 1921 for the photoelectric law.",
    ),
    "d3": ("Quantum", "Max Planck won the physics prize of 1918 for the energy quanta."),
    "d4": ("Electron", "J. J. Thomson won the physics prize of 1906 for the electron."),
    "dup": ("X-rays", f"In 1901 {GOLD} received the first physics Nobel Prize for X-rays."),
    "cf": ("Early prizes", "The very first Nobel Prize in Physics went to Hendrik Lorentz."),
    "amb": ("Röntgen", f"{GOLD} was honoured first; a prize for physics, in Stockholm."),
    "irr": ("Physics", "Physics is the natural science of matter and its motion in space."),
}
WRONG = {"d1": "Marie Curie", "d2": "Albert Einstein", "d3": "Max Planck", "d4": "J. J. Thomson"}


def plant(**extra) -> dict:
    """Return the planted question: gold, four hard distractors, a duplicate, and others."""
    roles = {"g": {"role": "gold"}, "irr": {"role": "irrelevant"}}
    roles |= {k: {"role": "distractor", "answer": a} for k, a in WRONG.items()}
    roles |= {"dup": {"role": "duplicate", "of": "g"}}
    roles |= {"cf": {"role": "counterfactual", "answer": "Hendrik Lorentz"}}
    roles |= {"amb": {"role": "duplicate", "of": "g", "descriptor": ""}}
    items = [{"pmid": k, "title": TEXTS[k][0], "text": TEXTS[k][1]} | roles[k] for k in TEXTS]
    return {
        "id": "q1",
        "question": QUESTION,
        "answer": GOLD,
        "aliases": ["Röntgen"],
        "descriptor": "Nobel",
        "passages": items,
    } | extra


UNCALIBRATED = {
    **OLD_UTILITIES,
    "curve": "u",
    "strength": 0.8,
    "override": 0.0,
    "cite_mismatch": 0.0,
    "misquote": 0.0,
    "interaction": 0.0,
    "logprob_noise": 0.0,
}
"""The reader as it was before its defaults came from published measurements: the checks
below that pin its exact readings and scores pin these settings."""


def docs(*keys: str) -> list[dict]:
    return [{"pmid": k, "title": TEXTS[k][0], "abstract": TEXTS[k][1]} for k in keys]


class Member(BaseModel):
    answer: list[str] = Field(max_length=5)
    pmids: list[str] = Field(max_length=3)


class Cited(BaseModel):
    answer: str = Field(max_length=80)
    passage: int = Field(ge=1)
    quote: str = Field(max_length=200)
    confidence: float = Field(ge=0, le=1)


class Triple(BaseModel):
    answer: str
    entity: str
    descriptor: str


class PairRelation(BaseModel):
    first: Triple
    second: Triple
    label: Literal["duplicated", "counterfactual", "distracting", "ambiguous", "none"]


def chat_model(endpoint: SimulatedEndpoint, method: str = "json_schema") -> ChatModel:
    spec = ModelSpec(
        provider="openai",
        model="reader",
        base_url=endpoint.base_url,
        structured_method=method,
        prompt_logprobs=True,
        max_retries=0,
    )
    llm = ChatOpenAI(model="reader", base_url=endpoint.base_url, api_key="x", max_retries=0)
    return ChatModel(spec=spec, llm=llm)


async def ask(model: ChatModel, schema: type[BaseModel], order: list[str], **extra) -> BaseModel:
    messages = render(
        "ensemble", instructions="Answer.", contexts=passages(docs(*order), 6000), question=QUESTION
    )
    reply = await model.structured(schema, messages, **extra)
    assert reply.error is None, reply.error
    return reply.value


def u_curve(n: int, strength: float = 0.8) -> list[float]:
    """The lost-in-the-middle curve, written out here so the test does not trust the reader."""

    def dip(x: float) -> float:
        return 4 * x * (1 - x) + 0.3 * x  # leaning to primacy: the last place is read less

    deepest = max(dip(k / 10_000) for k in range(10_001))
    return [1 - strength * dip(j / (n - 1)) / deepest for j in range(n)]


async def test_a_reading_is_deterministic_cites_and_quotes_the_passage_it_read():
    order = ["d1", "g", "d2", "irr", "dup"]
    with SimulatedEndpoint(
        0.0, planted=[plant()], reader=ReaderSettings(seed=5, **UNCALIBRATED)
    ) as endpoint:
        model = chat_model(endpoint)
        first = [await ask(model, Cited, order) for _ in range(3)]
        member = await ask(model, Member, order)
        calling = await ask(chat_model(endpoint, "function_calling"), Cited, order)
        json_mode = await ask(chat_model(endpoint, "json_mode"), Member, order)
    assert first[0] == first[1] == first[2]  # same seed and prompt: same reading
    shown = dict(zip(order, docs(*order), strict=True))
    for reply in [*first, calling]:
        pmid = order[reply.passage - 1]
        body = f"{shown[pmid]['title']}\n{shown[pmid]['abstract']}"
        assert reply.quote and reply.quote in body  # verbatim from the passage it cites
        assert reply.answer == (WRONG.get(pmid) or GOLD)
        assert reply.answer in reply.quote
    curve = u_curve(5)
    utility = {"d1": 0.7, "d2": 0.7, "irr": 0.05, "g": 1.0, "dup": 1.0}
    weights = [utility[k] * c for k, c in zip(order, curve, strict=True)]
    share = {k: w / sum(weights) for k, w in zip(order, weights, strict=True)}
    read = order[first[0].passage - 1]
    expected = share["g"] + share["dup"] if read in ("g", "dup") else share[read]
    assert first[0].confidence == pytest.approx(expected, abs=1e-4)
    assert len(member.pmids) == 1 and member.answer == [WRONG.get(member.pmids[0]) or GOLD]
    assert json_mode.answer == [WRONG.get(json_mode.pmids[0]) or GOLD]
    kinds = {r["kind"] for r in endpoint.reader.records}
    assert kinds == {"member"} and len(endpoint.reader.records) == 6


async def test_a_quote_keeps_the_answer_within_a_tight_bound():
    short = create_model(
        "Short", answer=(str, ...), passage=(int, ...), quote=(str, Field(max_length=30))
    )
    with SimulatedEndpoint(
        0.0, planted=[plant()], reader=ReaderSettings(**OLD_UTILITIES, misquote=0)
    ) as endpoint:
        reply = await ask(chat_model(endpoint), short, ["g"])
    assert reply.answer == GOLD and GOLD in reply.quote and reply.quote in TEXTS["g"][1]


def middle_and_end_rates(settings: ReaderSettings, permutations: int = 600) -> tuple[float, float]:
    """Return how often gold is answered when shown in the middle and at either end."""
    keys = ["g", "d1", "d2", "d3", "d4", "irr"]
    # Distinct orders: each prompt has one fixed reading, so a repeated order adds nothing.
    orders = random.Random(11).sample(list(itertools.permutations(keys)), permutations)
    seen: dict[str, list[bool]] = {"middle": [], "end": []}
    with SimulatedEndpoint(0.0, planted=[plant()], reader=settings) as endpoint:
        client = openai.OpenAI(base_url=endpoint.base_url, api_key="x", max_retries=0)
        schema = {"type": "json_schema", "json_schema": {"schema": Cited.model_json_schema()}}
        for order in orders:
            prompt = f"{passages(docs(*order), 6000)}\n\nQuestion: {QUESTION}"
            done = client.chat.completions.create(
                model="reader",
                messages=[{"role": "user", "content": prompt}],
                response_format=schema,
            )
            answer = json.loads(done.choices[0].message.content)["answer"]
            where = {0: "end", 5: "end", 2: "middle", 3: "middle"}.get(order.index("g"))
            if where:
                seen[where].append(answer == GOLD)
    return sum(seen["middle"]) / len(seen["middle"]), sum(seen["end"]) / len(seen["end"])


def position_bias_visible(middle: float, end: float) -> bool:
    """Gold read clearly less often in the middle than at the ends (lost in the middle)."""
    return end - middle >= 0.2


def test_permutations_draw_differently_and_the_u_curve_shows_in_aggregate():
    middle, end = middle_and_end_rates(ReaderSettings(**OLD_UTILITIES, curve="u", seed=2))
    # u at strength 0.8 over 6 places: [1, .52, .25, .21, .39, .79]; against four distractors
    # of 0.7 and an irrelevant passage gold is read about 0.1 of the time in the middle and
    # 0.4 at an end.
    assert middle < 0.2 and end > 0.3
    assert position_bias_visible(middle, end)


def test_a_reader_that_ignores_the_curve_fails_the_position_check():
    middle, end = middle_and_end_rates(ReaderSettings(**OLD_UTILITIES, curve="flat", seed=2))
    assert not position_bias_visible(middle, end)  # the check above can fail


async def test_different_orders_read_different_passages_reproducibly():
    with SimulatedEndpoint(
        0.0, planted=[plant()], reader=ReaderSettings(**OLD_UTILITIES, seed=9)
    ) as endpoint:
        model = chat_model(endpoint)
        orders = [list(p) for p in itertools.islice(itertools.permutations(["g", "d1", "d2"]), 6)]
        read = [order[(await ask(model, Cited, order)).passage - 1] for order in orders]
        again = [order[(await ask(model, Cited, order)).passage - 1] for order in orders]
    assert read == again and len(set(read)) > 1
    with SimulatedEndpoint(
        0.0, planted=[plant()], reader=ReaderSettings(**OLD_UTILITIES, seed=10)
    ) as endpoint:
        other = [
            order[(await ask(chat_model(endpoint), Cited, order)).passage - 1] for order in orders
        ]
    assert other != read  # the seed is part of every draw


def test_sampled_requests_depart_from_the_greedy_reading_over_http():
    order = ["d1", "g", "d2", "irr", "dup"]
    schema = {"type": "json_schema", "json_schema": {"schema": Cited.model_json_schema()}}
    prompt = f"{passages(docs(*order), 6000)}\n\nQuestion: {QUESTION}"
    settings = ReaderSettings(
        **OLD_UTILITIES, sample_agreement=0.5, cite_mismatch=0.0, misquote=0.0
    )
    with SimulatedEndpoint(0.0, planted=[plant()], reader=settings) as endpoint:
        client = openai.OpenAI(base_url=endpoint.base_url, api_key="x", max_retries=0)

        def answers(**extra) -> list[str]:
            return [
                json.loads(
                    client.chat.completions.create(
                        model="reader",
                        messages=[{"role": "user", "content": prompt}],
                        response_format=schema,
                        **extra,
                    )
                    .choices[0]
                    .message.content
                )["answer"]
                for _ in range(12)
            ]

        greedy, zero, sampled = answers(), answers(temperature=0), answers(temperature=1.0)
    assert len(set(greedy)) == 1 and zero == greedy  # no temperature, or 0: greedy
    assert len(set(sampled)) > 1 and greedy[0] in sampled
    temperatures = {r.get("temperature") for r in endpoint.reader.records}
    assert temperatures == {None, 1.0}


async def loglikelihood(endpoint: SimulatedEndpoint, context: str, continuation: str) -> float:
    value, tokens = await chat_model(endpoint).loglikelihood(context, continuation)
    assert tokens > 0
    return value


async def test_answer_logprobs_are_the_shown_weight_shares_and_rank_by_utility_times_position():
    floor = 1e-3
    settings = ReaderSettings(seed=1, floor=floor, **UNCALIBRATED)
    with SimulatedEndpoint(0.0, planted=[plant()], reader=settings) as endpoint:
        scores = {}
        for order in (["g", "irr", "d1"], ["irr", "g", "d1"], ["d1", "irr", "g"]):
            context = f"{passages(docs(*order), 6000)}\n\nQuestion: {QUESTION}\nAnswer: "
            for answer in (GOLD, "Röntgen", "Marie Curie", "Niels Bohr"):
                scores[tuple(order), answer] = await loglikelihood(endpoint, context, answer)
            # The summed continuation log-probability is the answer's weight share.
            curve = u_curve(3)
            utility = {"g": 1.0, "irr": 0.05, "d1": 0.7}
            weights = {k: utility[k] * c for k, c in zip(order, curve, strict=True)}
            for answer, key in ((GOLD, "g"), ("Röntgen", "g"), ("Marie Curie", "d1")):
                share = weights[key] / sum(weights.values())
                expected = math.log((1 - floor) * share + floor)
                assert scores[tuple(order), answer] == pytest.approx(expected, abs=1e-9)
            assert scores[tuple(order), "Niels Bohr"] == pytest.approx(math.log(floor))
    # The ranking follows utility × position: gold at an end beats the distractor at the
    # other; gold in the middle (weight 0.2) loses to the distractor at an end (0.7).
    assert scores[("g", "irr", "d1"), GOLD] > scores[("g", "irr", "d1"), "Marie Curie"]
    assert scores[("irr", "g", "d1"), GOLD] < scores[("irr", "g", "d1"), "Marie Curie"]
    assert scores[("d1", "irr", "g"), GOLD] < scores[("g", "irr", "d1"), GOLD]  # primacy lean


async def test_question_logprobs_follow_moi_model_and_prompt_tokens_keep_their_values():
    from lab.simulate.server import token_logprob

    # The negative control: with no interaction and no noise, MoI's model holds exactly.
    settings = ReaderSettings(
        **OLD_UTILITIES, seed=4, curve="primacy", strength=0.6, interaction=0, logprob_noise=0
    )
    rng = random.Random(3)
    keys = ["g", "d1", "irr", "dup"]
    utility = {"g": 1.0, "d1": 0.7, "irr": 0.05, "dup": 1.0}
    weights = [1 - 0.6 * j / 3 for j in range(4)]
    position = [w / sum(weights) for w in weights]
    with SimulatedEndpoint(0.0, planted=[plant()], reader=settings) as endpoint:
        for _ in range(6):
            order = rng.sample(keys, 4)
            context = f"{passages(docs(*order), 6000)}\n\nQuestion: "
            observed = await loglikelihood(endpoint, context, QUESTION)
            expected = sum(a * math.log(utility[k]) for a, k in zip(position, order, strict=True))
            assert observed == pytest.approx(expected, abs=1e-9)  # Σ_j a_j u_π(j), Σ a = 1
        client = openai.OpenAI(base_url=endpoint.base_url, api_key="x")
        done = client.completions.create(
            model="m", prompt=context + QUESTION, echo=True, logprobs=1, max_tokens=0
        )
        response = client.completions.with_raw_response.create(
            model="m", prompt=context + QUESTION, echo=True, logprobs=1, max_tokens=0
        )
    logprobs = done.choices[0].logprobs
    before = [
        (t, lp)
        for t, lp, at in zip(
            logprobs.tokens, logprobs.token_logprobs, logprobs.text_offset, strict=True
        )
        if at < len(context)
    ]
    assert before[0][1] is None and all(lp == token_logprob(t) for t, lp in before[1:])
    assert json.loads(response.headers[READER_HEADER])["curve"] == "primacy"
    assert done.system_fingerprint == endpoint.reader.fingerprint()


async def relation(
    model: ChatModel, first: str, second: str, question: str = QUESTION
) -> PairRelation:
    def shown(key: str) -> str:
        return f"{TEXTS[key][0]} {TEXTS[key][1]}"

    messages = render(
        "organize_relation", question=question, first=shown(first), second=shown(second)
    )
    reply = await model.structured(PairRelation, messages, temperature=0.0)
    assert reply.error is None, reply.error
    return reply.value


async def test_relations_are_answered_as_planted():
    override = {"relations": [{"a": "irr", "b": "cf", "label": "ambiguous"}]}
    with SimulatedEndpoint(0.0, planted=[plant(**override)]) as endpoint:
        model = chat_model(endpoint, "function_calling")
        labels = {
            pair: (await relation(model, *pair)).label
            for pair in [
                ("g", "dup"),
                ("dup", "g"),
                ("g", "cf"),
                ("dup", "cf"),
                ("g", "d1"),
                ("d1", "cf"),
                ("g", "irr"),
                ("irr", "cf"),
            ]
        }
        triple = await relation(model, "g", "cf")
        clipped = render(
            "organize_relation",
            question=QUESTION,
            first=f"{TEXTS['cf'][0]} {TEXTS['cf'][1]}"[:40] + " …",
            second=f"{TEXTS['d2'][0]} {TEXTS['d2'][1]}",
        )
        cut = (await model.structured(PairRelation, clipped)).value
        elsewhere = await relation(model, "g", "cf", question="an unplanted question")
    assert labels == {
        ("g", "dup"): "duplicated",
        ("dup", "g"): "duplicated",
        ("g", "cf"): "counterfactual",
        ("dup", "cf"): "counterfactual",
        ("g", "d1"): "distracting",
        ("d1", "cf"): "distracting",
        ("g", "irr"): "none",
        ("irr", "cf"): "ambiguous",  # the planted override
    }
    assert triple.first == Triple(answer=GOLD, entity="", descriptor="Nobel")
    assert triple.second == Triple(answer="Hendrik Lorentz", entity="", descriptor="Nobel")
    assert cut.label == "distracting" and cut.first.answer == "Hendrik Lorentz"
    assert elsewhere.label == "counterfactual"  # found by text across the plants
    plants = Plants.load([plant()])
    (question,) = plants.questions
    assert plants.relation(question, "g", "amb") == "duplicated"  # one duplicate chain
    assert plants.relation(question, "cf", "amb") == "none"  # one descriptor empty, answers differ
    described = Plants.load([plant(passages=[*plant()["passages"][:1], _amb()])])
    assert described.relation(described.questions[0], "g", "a2") == "ambiguous"


def _amb() -> dict:
    return {"pmid": "a2", "role": "gold", "descriptor": ""}  # a second gold, undescribed


async def test_a_passage_planted_without_title_or_text_is_matched_by_id_only():
    # An id-only passage has no text for a shown one to agree with; the relation prompt, which
    # quotes passages by text, is still answered from the others (once: HTTP 400, an empty max).
    blank = {"pmid": "blank", "role": "irrelevant"}
    with SimulatedEndpoint(0.0, planted=[plant(passages=[*plant()["passages"], blank])]) as ep:
        model = chat_model(ep, "function_calling")
        found = await relation(model, "g", "cf")
    assert found.label == "counterfactual"
    plants = Plants.load([plant(passages=[blank])])
    assert plants.match_text("Nobel laureates The first Nobel Prize", None) == []


async def test_dedupe_pluralize_group_and_synthesis_prompts():
    group_schema = create_model("GroupAnswer", answer=(str, ...), cited_pmids=(list[str], ...))
    synthesis = create_model(
        "Synthesis",
        exact_answer=(list[str], Field(max_length=5)),
        ideal_answer=(str, Field(max_length=600)),
        confidence=(float, Field(ge=0, le=1)),
        cited_pmids=(list[str], Field(max_length=5)),
        rationale=(str, ""),
    )
    plural = create_model("PluralQuestion", question=(str, ...))
    dupes = create_model("Pair", index=(int, ...), same_as=(int, ...))
    dedupe = create_model("Duplicates", duplicates=(list[dupes], Field(max_length=10)))
    order = ["g", "d1", "dup", "cf"]
    contexts = passages(docs(*order), 6000)
    # What synthesize tells the reader: the decision as quorum renders it.
    votes = decision_lines(
        {
            "strategy": "permute_vote",
            "answers": [
                {"answer": "Marie Curie", "support": 3.0, "cited": ["d1"]},
                {"answer": GOLD, "support": 2.0, "cited": ["g"]},
            ],
            "order": order,
            "why": "3 of 5 members answered 'Marie Curie' (majority vote)",
            "settings": {},
            "source": "ensemble",
        },
        [],
    )
    planted = [plant()]
    with SimulatedEndpoint(
        0.0, planted=planted, reader=ReaderSettings(**OLD_UTILITIES, override=0.0)
    ) as endpoint:
        model = chat_model(endpoint)

        async def call(schema, name, **values):
            reply = await model.structured(schema, render(name, **values))
            assert reply.error is None, reply.error
            return reply.value

        found = await call(dedupe, "organize", question=QUESTION, contexts=contexts)
        plural_q = await call(plural, "organize_pluralize", question="What is the cause of sepsis?")
        plural_nq = await call(plural, "organize_pluralize", question=QUESTION)
        group = await call(
            group_schema,
            "organize_group",
            contexts=passages(docs("g", "d1"), 6000),
            question=QUESTION,
        )
        decided = await call(
            synthesis,
            "synthesize",
            instructions="",
            contexts=contexts,
            question=QUESTION,
            decision=votes,
        )
    assert [(d.index, d.same_as) for d in found.duplicates] == [(3, 1)]
    assert plural_q.question == "What are the causes of sepsis?"
    assert (
        plural_nq.question.startswith("What are all the answers") and QUESTION in plural_nq.question
    )
    assert group.answer == f"{GOLD} (Nobel); Marie Curie" and group.cited_pmids == ["g", "d1"]
    assert decided.exact_answer == ["Marie Curie"] and decided.cited_pmids == ["d1"]
    assert "Marie Curie" in decided.ideal_answer
    with SimulatedEndpoint(
        0.0, planted=planted, reader=ReaderSettings(**OLD_UTILITIES, override=1.0)
    ) as endpoint:
        reply = await chat_model(endpoint).structured(
            synthesis,
            render(
                "synthesize",
                instructions="",
                contexts=contexts,
                question=QUESTION,
                decision=votes,
            ),
        )
    assert endpoint.reader.records[-1]["kind"] == "synthesis-override"
    assert reply.value.cited_pmids == endpoint.reader.records[-1]["read"]


async def test_a_stated_decision_is_followed_and_cited():
    synthesis = create_model(
        "Synthesis",
        exact_answer=(list[str], Field(max_length=5)),
        ideal_answer=(str, ...),
        confidence=(float, Field(ge=0, le=1)),
        cited_pmids=(list[str], ...),
    )
    order = ["d1", "g", "dup", "irr"]
    prompt = f"{passages(docs(*order), 6000)}\n\nQuestion: {QUESTION}\n\n"
    with SimulatedEndpoint(
        0.0, planted=[plant()], reader=ReaderSettings(**UNCALIBRATED)
    ) as endpoint:
        model = chat_model(endpoint)
        replies = [
            (
                await model.structured(
                    synthesis, [HumanMessage(content=prompt + f"Ensemble decision: {decision}")]
                )
            ).value
            for decision in ("Röntgen", '[["Marie Curie", 0.9], ["Röntgen", 0.1]]')
        ]
    weights = dict(zip(order, u_curve(4), strict=True))
    weights = {k: w * {"d1": 0.7, "irr": 0.05}.get(k, 1.0) for k, w in weights.items()}
    gold_share = (weights["g"] + weights["dup"]) / sum(weights.values())
    assert replies[0].exact_answer == ["Röntgen"] and replies[0].cited_pmids == ["g", "dup"]
    assert replies[0].confidence == pytest.approx(gold_share, abs=1e-4)
    assert replies[1].exact_answer == ["Marie Curie"] and replies[1].cited_pmids == ["d1"]


def test_settings_are_reported_and_no_plants_changes_nothing(tmp_path):
    path = tmp_path / "plants.jsonl"
    path.write_text(json.dumps(plant()) + "\n" + json.dumps(plant(id="q2", question="other")))
    settings = ReaderSettings(
        **(OLD_UTILITIES | {"distractor_strength": 0.6}), curve="recency", strength=0.5, seed=7
    )
    with SimulatedEndpoint(0.0, planted=path, reader=settings) as endpoint:
        with urllib.request.urlopen(endpoint.base_url + "/reader") as response:
            described = json.loads(response.read())
        llm = ChatOpenAI(model="m", base_url=endpoint.base_url, api_key="x")
        raw = llm.with_structured_output(Member, method="json_schema", include_raw=True).invoke(
            "no passages here"
        )
    assert described == endpoint.reader.describe()
    assert described | {"plants": None} == {
        "mode": "planted",
        "curve": "recency",
        "strength": 0.5,
        "seed": 7,
        "distractor_strength": 0.6,
        "irrelevant_utility": 0.05,
        "floor": 0.001,
        "override": 0.1,
        "sample_agreement": 0.85,
        "cite_mismatch": 0.255,
        "misquote": 0.169,
        "interaction": 0.5,
        "logprob_noise": 0.1,
        "plants": None,
    }
    assert described["plants"]["questions"] == 2 and len(described["plants"]["digest"]) == 16
    fingerprint = raw["raw"].response_metadata["system_fingerprint"]
    assert json.loads(fingerprint) == described
    assert raw["parsed"] == Member(answer=["simulated"], pmids=["simulated"])  # not planted
    with SimulatedEndpoint(0.0) as plain:
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(plain.base_url + "/reader")
        client = openai.OpenAI(base_url=plain.base_url, api_key="x")
        response = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": passages(docs("g"), 100)}]
        )
    assert missing.value.code == 404 and READER_HEADER not in response.headers
    assert response.parse().choices[0].message.content == "simulated"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"passages": [{"pmid": "x", "role": "hint"}]}, "role must be one of"),
        ({"passages": [{"pmid": "x", "role": "distractor"}]}, "needs its own planted 'answer'"),
        ({"passages": [{"pmid": "x", "role": "duplicate", "of": "y"}]}, "needs 'of'"),
        (
            {
                "passages": [
                    {"pmid": "x", "role": "duplicate", "of": "y"},
                    {"pmid": "y", "role": "duplicate", "of": "x"},
                ]
            },
            "cycle",
        ),
        ({"answer": ""}, "gold 'answer'"),
        ({"colour": 1}, "unknown key"),
        ({"relations": [{"a": "g", "b": "nope", "label": "duplicated"}]}, "relation"),
    ],
)
def test_bad_plants_are_refused_with_a_reason(change, message):
    with pytest.raises(PlantError, match=message):
        Plants.load([plant(**change)])


def test_settings_and_files_are_checked(tmp_path):
    with pytest.raises(ValueError, match="curve"):
        ReaderSettings(**OLD_UTILITIES, curve="w")
    with pytest.raises(ValueError, match="strength"):
        ReaderSettings(**OLD_UTILITIES, strength=1.0)
    with pytest.raises(ValueError, match="need plants"):
        SimulatedEndpoint(0.0, reader=ReaderSettings())
    with pytest.raises(PlantError, match="cannot read"):
        Plants.load(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text(json.dumps({"questions": [plant()]}))
    assert Plants.load(tmp_path / "list.json").questions[0].id == "q1"


def test_the_command_line_serves_a_planted_reader(tmp_path, capsys):
    path = tmp_path / "plants.json"
    path.write_text(json.dumps([plant()]))
    stop = threading.Event()
    argv = [
        "--port",
        "0",
        "--planted",
        str(path),
        "--reader-curve",
        "primacy",
        "--reader-seed",
        "3",
        "--reader-set",
        "sample_agreement=0.9",
        "--reader-set",
        "interaction=0",
    ]
    thread = threading.Thread(target=main, args=(argv,), kwargs={"stop": stop})
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not (out := capsys.readouterr().out) and time.monotonic() < deadline:
            time.sleep(0.02)
        started = json.loads(out)
        with urllib.request.urlopen(started["base_url"] + "/reader") as response:
            assert json.loads(response.read()) == started["reader"]
    finally:
        stop.set()
        thread.join(5)
    assert started["reader"]["curve"] == "primacy" and started["reader"]["seed"] == 3
    assert started["reader"]["strength"] == 0.8  # primacy's own default, not liu's
    assert (started["reader"]["sample_agreement"], started["reader"]["interaction"]) == (0.9, 0)
    assert main(["--planted", str(tmp_path / "missing.json")]) == 2
    assert main(["--planted", str(path), "--reader-set", "colour=1"]) == 2
    assert "keys: curve, strength" in capsys.readouterr().err


def test_the_evidence_frame_is_never_part_of_a_passage_the_simulator_reads():
    # The last passage once read "… leather.\n</evidence>": the simulated verifier quoted
    # "</evidence>" and its synthesis answered "yes. </evidence>" (CORG's ConflictQA arm without
    # the counterfactual, where one passage is left and so is last).
    from lab.simulate.prompt_text import numbered_passages, pair_passages
    from nodes.passages import passages, quoted

    docs = [
        {"pmid": "1", "title": "Cattle", "abstract": "Cattle are slaughtered for leather."},
        {"pmid": "2", "title": "Drums", "abstract": "Drums are often made with leather."},
    ]
    prompt = f"Question: Is leather from cattle?\n\n{passages(docs, 400)}\n\nAnswer in JSON."
    bodies = [b.body for b in numbered_passages(prompt)]
    assert bodies == [
        "Cattle\nCattle are slaughtered for leather.",
        "Drums\nDrums are often made with leather.",
    ]
    pair = quoted("Passage 1:\nfirst text\n\nPassage 2:\nsecond text")
    relation = f"Question: q\n\n{pair}"
    assert pair_passages(relation) == ("first text", "second text")
