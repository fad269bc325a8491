"""The evaluations' shared measures: intervals, and CORG's planted pairs scored pair by pair."""

import pytest

from infra.stats import paired, wilson
from lab.trials.datasets import MethodCase, Passage
from lab.trials.method_rows import corg_measures


def test_wilson_interval_holds_the_proportion_and_narrows_with_n():
    low, high = wilson(8, 10)
    assert low < 0.8 < high
    assert wilson(80, 100)[1] - wilson(80, 100)[0] < high - low
    assert wilson(0, 0) == [0.0, 1.0]
    assert wilson(10, 10)[1] == 1.0 and wilson(0, 10)[0] == 0.0
    assert wilson(50, 100) == pytest.approx([0.4038, 0.5962], abs=1e-4)  # the textbook value


def _pairs(both: int, method: int, control: int, neither: int) -> tuple[list[bool], list[bool]]:
    """Return paired correctness with these counts of (method, control) outcomes."""
    m = [True] * both + [True] * method + [False] * control + [False] * neither
    c = [True] * both + [False] * method + [True] * control + [False] * neither
    return m, c


def test_mcnemar_p_is_the_exact_binomial_of_the_discordant_pairs():
    assert paired(*_pairs(5, 3, 3, 5))["p"] == 1.0  # b = c
    assert paired(*_pairs(0, 0, 0, 7))["p"] == 1.0  # no discordant pair
    got = paired(*_pairs(4, 10, 0, 2))
    assert (got["method_only"], got["control_only"]) == (10, 0)
    assert got["p"] == pytest.approx(2 / 1024, abs=1e-6)
    assert paired(*_pairs(4, 0, 10, 2))["p"] == pytest.approx(2 / 1024, abs=1e-6)
    assert paired(*_pairs(0, 12, 2, 36))["p"] == pytest.approx(0.012939, abs=1e-6)


def test_the_paired_difference_interval_is_newcombes_method_10():
    # Newcombe (1998), Table II, example (a): 36 both right, 12 and 2 discordant, 0 neither;
    # method 10 gives 0.0569 to 0.3404 around the difference 0.2.
    assert paired(*_pairs(36, 12, 2, 0))["diff_ci95"] == pytest.approx([0.0569, 0.3404], abs=1e-4)
    low, high = paired(*_pairs(5, 3, 3, 5))["diff_ci95"]
    assert low == pytest.approx(-high) and low < 0 < high  # symmetric around no difference
    low, high = paired(*_pairs(0, 10, 0, 0))["diff_ci95"]
    assert 0 < low < high == 1.0  # all discordant one way: stays inside [-1, 1]
    assert paired([], []) == {
        "method_only": 0,
        "control_only": 0,
        "p": 1.0,
        "diff_ci95": [-1.0, 1.0],
    }
    with pytest.raises(ValueError):
        paired([True], [True, False])


def _case() -> MethodCase:
    passages = (
        Passage("1", "gold", "gold"),
        Passage("2", "gold again", "duplicate", of="1"),
        Passage("3", "the other side", "counterfactual", "no", of="1"),
        Passage("4", "the other side again", "duplicate", of="3"),
        Passage("5", "noise", "irrelevant", "maybe"),
    )
    return MethodCase("c", "q?", "yesno", ("yes",), passages, "conflictqa")


@pytest.mark.parametrize(
    ("groups", "split", "collapsed"),
    [
        ([["2"], ["4"]], [True], [True, True]),  # each side by its duplicate, apart
        ([["1", "5"], ["3", "4"]], [True], [True, False]),  # 3 and its duplicate both kept
        ([["2", "3"]], [False], [True, True]),  # both sides in one group
        ([["1"], ["2"]], [False], [False, False]),  # one side only, both copies of it kept
        ([], [False], [False, False]),
    ],
)
def test_corg_measures_follow_duplicate_chains_to_each_side(groups, split, collapsed):
    state = {
        "groups": [{"pmids": g} for g in groups],
        "relation_graph": {"calls": 4, "naive_calls": 10},
        "contexts": [{}] * 5,
    }
    measures = corg_measures(_case(), state)
    assert measures["counterfactuals_split"] == split
    assert measures["duplicates_collapsed"] == collapsed
    assert (measures["relation_calls"], measures["pairs"]) == (4, 10)
    assert measures["groups"] == [sorted(g) for g in groups]
