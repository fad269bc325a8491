"""The report's paired statistics on hand-made data."""

import pytest

from graphs.bioasq.report import mcnemar, paired_bootstrap


def test_mcnemar_counts_discordant_pairs_and_tests_them_exactly():
    first = [True] * 8 + [False] * 2
    second = [True] * 2 + [False] * 8
    result = mcnemar(first, second)
    assert (result["b"], result["c"]) == (6, 0)
    assert result["p_value"] == pytest.approx(2 * 0.5**6, abs=1e-4)  # exact two-sided binomial
    assert mcnemar([True, False], [True, False]) == {"b": 0, "c": 0, "p_value": 1.0}


def test_paired_bootstrap_interval_contains_the_difference_and_p_is_small_for_a_clear_gap():
    first = [0.9, 0.8, 1.0, 0.7, 0.9, 0.8, 1.0, 0.9, 0.8, 0.9]
    second = [x - 0.3 for x in first]
    result = paired_bootstrap(first, second)
    assert result["difference"] == pytest.approx(0.3)
    assert result["low"] <= 0.3 <= result["high"] and result["p_value"] == 0.0
    noisy = paired_bootstrap([1, 0, 1, 0], [0, 1, 0, 1])
    assert noisy["difference"] == 0.0 and noisy["p_value"] > 0.5
    assert paired_bootstrap([], [])["n"] == 0
