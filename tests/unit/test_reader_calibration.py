"""The planted reader's calibration to published measurements of real models.

Each check reads many views of one planted question and compares a rate with the setting it
comes from (greedy determinism, sampled agreement, citation mismatch, synthesis override), or
log P(q | passages) with MoI's linear model (equal only at interaction 0, noise 0).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest
from pydantic import BaseModel, Field

from lab.simulate.calibration import LIU_ACCURACY, LIU_DEPTH, SELF_CONSISTENCY_AGREEMENT
from lab.simulate.planted import Plants
from lab.simulate.reader import (
    PlantedReader,
    ReaderSettings,
    position_curve,
    settings_from_pairs,
)
from lab.simulate.replies import chat_reply
from nodes.passages import passages

OLD_UTILITIES = {"distractor_strength": 0.7, "irrelevant_utility": 0.05}
"""The utilities these checks' expected figures were worked out with (the defaults are now
fitted to real models' reading diagnostics: lab/simulate/calibration.py)."""

QUESTION = "who discovered the planted element"
ANSWERS = {
    "g": "Ada Lovelace",
    "d1": "Marie Curie",
    "d2": "Albert Einstein",
    "d3": "Max Planck",
    "d4": "Niels Bohr",
}
KEYS = [*ANSWERS, "irr"]
UTILITY = {"g": 1.0, "d1": 0.7, "d2": 0.7, "d3": 0.7, "d4": 0.7, "irr": 0.05}


class Cited(BaseModel):
    answer: str
    passage: int = Field(ge=1)
    quote: str


class Synthesis(BaseModel):
    exact_answer: list[str]
    ideal_answer: str
    cited_pmids: list[str]


def text(key: str) -> str:
    if key == "irr":
        return "Elements are pure substances made of one kind of atom."
    return f"The planted element was discovered by {ANSWERS[key]} in a laboratory."


def plants() -> Plants:
    roles = {k: {"role": "distractor", "answer": a} for k, a in ANSWERS.items() if k != "g"}
    roles |= {"g": {"role": "gold"}, "irr": {"role": "irrelevant"}}
    items = [{"pmid": k, "title": k.upper(), "text": text(k)} | roles[k] for k in KEYS]
    question = {"id": "q", "question": QUESTION, "answer": ANSWERS["g"], "passages": items}
    return Plants.load([question])


def prompt(order: list[str], tail: str = "") -> str:
    docs = [{"pmid": k, "title": k.upper(), "abstract": text(k)} for k in order]
    return f"{passages(docs, 6000)}\n\nQuestion: {QUESTION}{tail}"


ORDERS = [list(p) for p in random.Random(5).sample(list(itertools.permutations(KEYS)), 400)]
EVERY_ORDER = [list(p) for p in itertools.permutations(KEYS)]


def near(observed: float, rate: float, n: int) -> bool:
    """Whether a rate observed over n independent draws is within 3.5 standard errors."""
    return abs(observed - rate) <= 3.5 * math.sqrt(rate * (1 - rate) / n) + 0.005


def body(key: str) -> str:
    """A passage as the prompt shows it: its title line, then its text."""
    return f"{key.upper()}\n{text(key)}"


def reply(reader: PlantedReader, order: list[str], schema=Cited, temperature=None, tail=""):
    found = chat_reply(
        reader, [("user", prompt(order, tail))], schema.model_json_schema(), temperature
    )
    return schema.model_validate(found)


def test_the_liu_curve_is_the_measured_accuracy_by_position_and_the_default():
    settings = ReaderSettings()
    assert settings.curve == "liu" and settings.strength == pytest.approx(1 - 53.8 / 75.8)
    curve = position_curve("liu", settings.strength, 20)
    measured = [curve[p - 1] for p in (1, 5, 10, 15, 20)]
    assert measured == pytest.approx([a / 75.8 for a in LIU_ACCURACY])
    assert min(curve) == pytest.approx(1 - LIU_DEPTH) and curve.index(min(curve)) == 9
    deeper = position_curve("liu", 0.8, 20)
    assert deeper[0] == 1 and min(deeper) == pytest.approx(0.2)  # strength: the dip's depth
    # The other curves keep their old default strength, so explicit old settings still hold.
    assert ReaderSettings(**OLD_UTILITIES, curve="u").strength == 0.8
    assert position_curve("flat", 0.5, 3) == [1.0, 1.0, 1.0]


def test_greedy_readings_are_deterministic_per_prompt():
    reader = PlantedReader(plants())
    for order in ORDERS[:40]:
        first = reply(reader, order)
        assert all(reply(reader, order, temperature=t) == first for t in (None, 0, 0.0))


def modal_share(settings: ReaderSettings, temperature: float, k: int = 5) -> float:
    reader = PlantedReader(plants(), settings)
    shares = []
    for order in ORDERS:
        answers = Counter(reply(reader, order, temperature=temperature).answer for _ in range(k))
        shares.append(answers.most_common(1)[0][1] / k)
    return sum(shares) / len(shares)


def test_k_samples_of_one_view_agree_as_self_consistency_did():
    # Context Bagging Table 3: K = 5 samples at T = 1 agree 0.8494 on Qwen2.5-7B. The mean
    # share of the majority answer is 1 − d plus the rare case a departure outvotes greedy.
    assert modal_share(ReaderSettings(), 1.0) == pytest.approx(SELF_CONSISTENCY_AGREEMENT, abs=0.03)
    assert modal_share(ReaderSettings(**OLD_UTILITIES, sample_agreement=0.6), 1.0) == pytest.approx(
        0.62, abs=0.04
    )
    assert modal_share(ReaderSettings(), 0.0) == 1.0  # greedy never departs
    # agreement^T: T = 2 keeps the greedy answer 0.72 of the time, T = 0.5 0.92.
    assert modal_share(ReaderSettings(), 2.0) == pytest.approx(0.73, abs=0.04)
    assert modal_share(ReaderSettings(), 0.5) == pytest.approx(0.92, abs=0.03)


def test_samples_are_reproducible_and_the_greedy_reading_stays_put():
    def samples(reader: PlantedReader) -> list[list[str]]:
        return [
            sorted(reply(reader, order, temperature=1.0).answer for _ in range(5))
            for order in ORDERS[:30]
        ]

    first, again = PlantedReader(plants()), PlantedReader(plants())
    assert samples(first) == samples(again)  # the n-th sample of a view is seeded by n
    greedy = [reply(first, order).answer for order in ORDERS[:30]]
    assert greedy == [reply(again, order, temperature=0).answer for order in ORDERS[:30]]


@pytest.mark.parametrize("rate", [ReaderSettings().cite_mismatch, 0.5])
def test_members_cite_another_passage_at_the_set_rate_and_quote_it(rate):
    assert ReaderSettings().cite_mismatch == pytest.approx(1 - 0.745)
    reader = PlantedReader(
        plants(), ReaderSettings(**OLD_UTILITIES, cite_mismatch=rate, misquote=0.0)
    )
    other = 0
    for order in EVERY_ORDER:
        answer = reply(reader, order)
        record = reader.records[-1]
        cited = order[answer.passage - 1]
        assert answer.quote in body(cited)  # the quote comes from the passage it cites
        assert answer.answer == (ANSWERS.get(record["read"][0]) or answer.answer)
        if cited != record["read"][0]:
            other += 1
            assert record["cited"] == [cited]
    assert near(other / len(EVERY_ORDER), rate, len(EVERY_ORDER)), other / len(EVERY_ORDER)
    untold = PlantedReader(
        plants(), ReaderSettings(**OLD_UTILITIES, cite_mismatch=0.0, misquote=0.0)
    )
    for order in ORDERS[:50]:
        answer = reply(untold, order)
        assert order[answer.passage - 1] == untold.records[-1]["read"][0]


@pytest.mark.parametrize("rate", [ReaderSettings().misquote, 0.5])
def test_members_misquote_at_the_set_rate_keeping_the_answer(rate):
    assert ReaderSettings().misquote == pytest.approx(1 - 4.12 / 4.96, abs=1e-3)
    reader = PlantedReader(
        plants(), ReaderSettings(**OLD_UTILITIES, cite_mismatch=0.0, misquote=rate)
    )
    misquoted = 0
    for order in EVERY_ORDER:
        answer = reply(reader, order)
        shown = body(order[answer.passage - 1])
        if answer.quote not in shown:
            misquoted += 1
            assert reader.records[-1]["misquoted"] and answer.answer in answer.quote
    assert near(misquoted / len(EVERY_ORDER), rate, len(EVERY_ORDER)), misquoted


@pytest.mark.parametrize("rate", [ReaderSettings().override, 0.4, 0.0])
def test_synthesis_overrides_the_decision_at_the_set_rate(rate):
    reader = PlantedReader(plants(), ReaderSettings(**OLD_UTILITIES, override=rate))
    tail = "\n\nEnsemble decision: Marie Curie"
    kinds = Counter()
    for order in EVERY_ORDER:
        answer = reply(reader, order, Synthesis, tail=tail)
        kinds[reader.records[-1]["kind"]] += 1
        if reader.records[-1]["kind"] == "synthesis":
            assert answer.exact_answer == ["Marie Curie"] and answer.cited_pmids == ["d1"]
    overridden = kinds["synthesis-override"] / len(EVERY_ORDER)
    assert near(overridden, rate, len(EVERY_ORDER)), overridden


def linear_residual(settings: ReaderSettings) -> tuple[float, list[float]]:
    """Fit log P(q | π) = Σ_j a_j log u(π_j) by least squares; return the RMS residual."""
    reader = PlantedReader(plants(), settings)
    rows, observed = [], []
    for order in ORDERS[:120]:
        order = order[:4]
        scored = reader.score(prompt(order, "\nQuestion: " + QUESTION))
        assert scored is not None and scored.kind == "question" and scored.logprob < 0
        rows.append([math.log(UTILITY[k]) for k in order])
        observed.append(scored.logprob)
    x, y = np.array(rows), np.array(observed)
    weights, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(np.sqrt(np.mean((x @ weights - y) ** 2))), observed


def test_question_likelihoods_follow_the_linear_model_only_without_interaction_and_noise():
    exact, _ = linear_residual(ReaderSettings(**OLD_UTILITIES, interaction=0.0, logprob_noise=0.0))
    assert exact < 1e-9  # the negative control: MoI's model holds exactly
    interacting, _ = linear_residual(ReaderSettings(**OLD_UTILITIES, logprob_noise=0.0))
    noisy, _ = linear_residual(ReaderSettings(**OLD_UTILITIES, interaction=0.0))
    assert interacting > 0.02 and noisy > 0.05
    _, default = linear_residual(ReaderSettings())
    assert linear_residual(ReaderSettings())[1] == default  # deterministic per prompt
    assert (
        linear_residual(ReaderSettings(**OLD_UTILITIES, seed=1))[1] != default
    )  # the seed moves the noise
    curve = position_curve("liu", LIU_DEPTH, 4)
    ranked = ["g", "d1", "d2", "irr"]
    lone = PlantedReader(plants(), ReaderSettings(**OLD_UTILITIES, logprob_noise=0.0))
    scored = lone.score(prompt(ranked, "\nQuestion: " + QUESTION))
    linear = sum(c / sum(curve) * math.log(UTILITY[k]) for c, k in zip(curve, ranked, strict=True))
    assert scored.logprob > linear  # the saturating term lifts a context with a useful passage


def test_settings_parse_from_key_value_pairs():
    parsed = settings_from_pairs(["curve=u", "seed=3", "override = 0", "interaction=0.25"])
    assert parsed == ReaderSettings(curve="u", seed=3, override=0.0, interaction=0.25)
    assert parsed.strength == 0.8
    assert settings_from_pairs([]) == ReaderSettings()
    for pairs, message in [
        (["colour=1"], "unknown reader setting 'colour'"),
        (["override"], "unknown reader setting 'override'"),
        (["seed=1.5"], "not an integer"),
        (["strength=x"], "not a number"),
        (["sample_agreement=1.5"], "sample_agreement must be in [0, 1]"),
        (["logprob_noise=-1"], "logprob_noise must be >= 0"),
        (["curve=zigzag"], "curve must be one of"),
    ]:
        with pytest.raises(ValueError, match=r"keys: curve, strength") as refused:
            settings_from_pairs(pairs)
        assert message in str(refused.value) and "\n" not in str(refused.value)
