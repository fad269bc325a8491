"""eval methods' controls: the method's own settings with one knob changed, and their report."""

import pytest
from pydantic import BaseModel

from lab.trials.controls import (
    CCV_MEMBERS,
    CONTROLS,
    CORG_BASELINES,
    MOI_PERMUTATIONS,
    controls_report,
    plan_arms,
    shape,
    strategy_settings,
)


@pytest.fixture
def tuned(settings):
    """Settings whose methods run off their defaults, so a control taking defaults shows."""
    ensemble = settings.ensemble.model_copy(
        update={
            "members": 7,
            "contexts": 9,
            "cobag": settings.ensemble.cobag.model_copy(update={"members": 3, "contexts": 6}),
            "ccv": settings.ensemble.ccv.model_copy(update={"members": 10, "contexts": 4}),
        }
    )
    return settings.model_copy(update={"ensemble": ensemble})


def _changed(a, b, prefix=""):
    """Return the dotted fields where two settings differ."""
    if isinstance(a, BaseModel):
        return [
            path
            for name in type(a).model_fields
            for path in _changed(getattr(a, name), getattr(b, name), f"{prefix}{name}.")
        ]
    return [] if a == b else [prefix.rstrip(".")]


@pytest.mark.parametrize(
    ("method", "control", "changed"),
    [
        ("cobag", "no_shuffle", ["ensemble.cobag.shuffle"]),
        ("cobag", "uniform", ["ensemble.cobag.sampling"]),
        ("cobag", "permute_vote", ["ensemble.strategy", "ensemble.members", "ensemble.contexts"]),
        ("ccv", "answer_count", ["ensemble.ccv.vote"]),
        ("moi", "flat_weights", ["ensemble.moi.weights"]),
        ("corg", "no_relations", ["organize.corg_relations"]),
    ],
)
def test_a_control_is_its_methods_settings_with_one_knob_changed(tuned, method, control, changed):
    arms = {arm.label: arm for arm in plan_arms(tuned, [method], ablations=False)}
    mine, theirs = arms[method], arms[f"{method}/{control}"]
    assert _changed(mine.settings, theirs.settings) == changed
    assert theirs.method == method
    assert shape(theirs.settings, method) == shape(mine.settings, method)  # same K and m


def test_each_method_runs_at_its_own_K_and_m(tuned):
    assert shape(strategy_settings(tuned, "single"), "single") == (1, 9)
    assert shape(strategy_settings(tuned, "permute_vote"), "permute_vote") == (7, 9)
    assert shape(strategy_settings(tuned, "cobag"), "cobag") == (3, 6)
    assert shape(strategy_settings(tuned, "ccv"), "ccv") == (10, 4)
    assert shape(strategy_settings(tuned, "moi"), "moi") == (1, 9)
    assert shape(strategy_settings(tuned, "corg"), "corg") == (1, tuned.organize.top_k)


def test_the_plan_holds_controls_for_chosen_methods_and_ablations_only_when_asked(tuned):
    labels = [a.label for a in plan_arms(tuned, ["single", "ccv"], ablations=False)]
    assert labels == ["single", "ccv", "ccv/answer_count"]
    labels = [a.label for a in plan_arms(tuned, list(CONTROLS), ablations=True)]
    for k in CCV_MEMBERS:
        assert f"ccv/members/{k}/citation" in labels and f"ccv/members/{k}/answer_count" in labels
    assert all(f"moi/permutations/{p}" in labels for p in MOI_PERMUTATIONS)
    assert all(f"corg/baselines/{b}" in labels for b in CORG_BASELINES)
    assert "corg/without_counterfactual" in labels
    assert len(labels) == len(set(labels))


def test_the_controls_report_pairs_each_control_with_its_method(tuned):
    arms = {arm.label: arm for arm in plan_arms(tuned, ["ccv"], ablations=False)}
    correct = {
        "ccv": [True] * 10 + [True] * 4 + [False] * 6,
        "ccv/answer_count": [True] * 10 + [False] * 4 + [False] * 6,
    }
    got = controls_report(arms, correct, ["ccv"])["ccv"]["answer_count"]
    assert (got["members"], got["contexts"]) == (10, 4)
    assert got["accuracy"] == 0.5
    assert got["paired"]["method_only"] == 4 and got["paired"]["control_only"] == 0
    assert got["paired"]["p"] == pytest.approx(2 / 16)
    assert got["beats_control"] is False  # 4 of 20 is not enough to say
