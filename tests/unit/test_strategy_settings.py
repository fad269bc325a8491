"""A strategy's settings are a typed, frozen record: what it ran with acts, and the decision
records it as plain JSON (the state and its checkpoints hold nothing else)."""

import dataclasses
import json

import pytest

from nodes.ensemble.strategies import STRATEGIES, Plan, StrategySettings, View
from nodes.ensemble.strategies.moi import MoiSettings

COMMON = {"models": ("m",), "seed": 13, "list_quorum": 0.5, "synonym_cosine": 0.9}


def member(view: int, answer: list[str]) -> dict:
    return {
        "model": "m",
        "view": view,
        "order": [],
        "temperature": 0.0,
        "answer": answer,
        "pmids": [],
        "raw": "",
        "error": None,
        "latency_s": 0.0,
        "tokens": 0,
    }


def test_the_settings_are_frozen():
    ran = StrategySettings(**COMMON, members=5, contexts=12, temperature=0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ran.shown = ("101",)
    shown = dataclasses.replace(ran, shown=("101", "102"))
    assert ran.shown is None and shown.shown == ("101", "102")


def test_the_record_is_json_with_unset_settings_left_out_and_shown_last():
    ran = MoiSettings(
        **COMMON,
        members=1,
        contexts=4,
        temperature=0.0,
        permutations="random",
        observed_orders=12,
        observation="joint",
        order="descending",
        weights="fitted",
        shown=("101",),
    )
    record = ran.record()
    assert json.loads(json.dumps(record)) == record
    assert record["models"] == ["m"] and list(record)[-1] == "shown"
    assert "dropped" not in record and "prefix_length" not in record  # unset: not recorded
    dropped = dataclasses.replace(ran, dropped={"m2": "TimeoutError"}).record()
    assert dropped["dropped"] == {"m2": "TimeoutError"}


@pytest.mark.parametrize("quorum", [0.5, 0.75])
async def test_the_list_quorum_the_plan_ran_with_is_the_one_that_acts(make_context, quorum):
    """The quorum is read from the settings record, never a default of the vote's own."""
    strategy = STRATEGIES["permute_vote"]
    ran = StrategySettings(
        **COMMON | {"list_quorum": quorum}, members=4, contexts=3, temperature=0.0
    )
    passage = {"pmid": "101", "title": "t", "abstract": "a", "score": 1.0}
    plan = Plan([View(None, i, [0], 0.0) for i in range(4)], [passage], ran)
    answers = [["a1", "b1", "c1"], ["a1", "b1"], ["a1", "d1"], ["e1"]]
    members = [member(i, a) for i, a in enumerate(answers)]
    votes = await strategy.tally(make_context(), "list", members, plan)
    decision = strategy.decide("list", members, plan, votes)
    expected = {0.5: ["a1", "b1"], 0.75: ["a1"]}[quorum]
    assert decision["answers"][0]["answer"] == expected
    assert f"at least {quorum:.0%} of 4 members" in decision["why"]
    assert decision["settings"]["list_quorum"] == quorum
