"""Ensemble strategies as arithmetic: Context Bagging, citation-consistent voting, MoI."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from nodes.ensemble.strategies import (
    CitedAnswer,
    MoIFit,
    ccv_select,
    cobag_views,
    mean_relevance,
    moi_permutations,
    moi_solve,
)

RELEVANCE = [0.9, 0.2, 0.7, 0.4, 0.8, 0.1, 0.5, 0.3]


def softmax(scores: list[float], tau: float) -> np.ndarray:
    weights = np.exp(np.asarray(scores) / tau)
    return weights / weights.sum()


# --- CoBag ------------------------------------------------------------------------------------


def test_core_is_in_every_view_and_views_have_the_requested_size():
    views = cobag_views(RELEVANCE, members=50, size=5, core=2, tau=0.1, seed=1)
    assert len(views) == 50
    for view in views:
        assert len(view) == 5
        assert len(set(view)) == 5
        assert {0, 4} <= set(view)  # the two most relevant contexts
        assert set(view) <= set(range(len(RELEVANCE)))


def test_core_ties_go_to_the_lower_index():
    views = cobag_views([0.5, 0.9, 0.9, 0.9], members=20, size=2, core=2, tau=1.0, seed=0)
    assert all(set(view) == {1, 2} for view in views)


def test_views_are_reproducible_for_a_seed_and_differ_across_seeds():
    kwargs = {"members": 8, "size": 4, "core": 1, "tau": 0.5}
    first = cobag_views(RELEVANCE, seed=7, **kwargs)
    assert first == cobag_views(RELEVANCE, seed=7, **kwargs)
    assert first != cobag_views(RELEVANCE, seed=8, **kwargs)


def test_view_order_is_shuffled():
    views = cobag_views(RELEVANCE, members=30, size=4, core=4, tau=1.0, seed=3)
    assert all(sorted(view) == [0, 2, 4, 6] for view in views)
    assert len({tuple(view) for view in views}) > 1


def test_a_small_pool_puts_every_context_in_every_view():
    views = cobag_views([0.3, 0.1, 0.2], members=20, size=5, core=1, tau=0.1, seed=0)
    assert all(sorted(view) == [0, 1, 2] for view in views)
    assert len({tuple(view) for view in views}) > 1
    assert cobag_views([], members=2, size=3, core=0, tau=1.0, seed=0) == [[], []]


def test_sampling_follows_the_softmax_of_relevance_over_tau():
    tau = 0.25
    draws = cobag_views(RELEVANCE, members=20_000, size=1, core=0, tau=tau, seed=11)
    counts = np.bincount([view[0] for view in draws], minlength=len(RELEVANCE))
    assert np.abs(counts / counts.sum() - softmax(RELEVANCE, tau)).max() < 0.02


def test_sampling_after_the_core_follows_the_softmax_of_the_rest():
    tau = 0.3
    draws = cobag_views(RELEVANCE, members=20_000, size=2, core=1, tau=tau, seed=5)
    rest = [i for i in range(len(RELEVANCE)) if i != 0]
    sampled = [next(i for i in view if i != 0) for view in draws]
    counts = np.bincount(sampled, minlength=len(RELEVANCE))[rest]
    expected = softmax([RELEVANCE[i] for i in rest], tau)
    assert np.abs(counts / counts.sum() - expected).max() < 0.02


def test_a_small_tau_lets_the_top_non_core_context_dominate():
    views = cobag_views(RELEVANCE, members=200, size=2, core=1, tau=0.005, seed=0)
    assert all(set(view) == {0, 4} for view in views)  # 0.8 beats 0.7 by e^20 at tau=0.005
    extreme = cobag_views(RELEVANCE, members=5, size=3, core=0, tau=1e-9, seed=0)
    assert all(set(view) == {0, 4, 2} for view in extreme)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"members": 0, "size": 3, "core": 1, "tau": 1.0}, "members"),
        ({"members": 2, "size": 3, "core": 4, "tau": 1.0}, "core"),
        ({"members": 2, "size": 3, "core": -1, "tau": 1.0}, "core"),
        ({"members": 2, "size": 3, "core": 1, "tau": 0.0}, "tau"),
        ({"members": 2, "size": 3, "core": 1, "tau": -1.0}, "tau"),
    ],
)
def test_cobag_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cobag_views(RELEVANCE, seed=0, **kwargs)


def test_cobag_rejects_non_finite_relevance():
    with pytest.raises(ValueError, match="finite"):
        cobag_views([0.1, math.nan], members=1, size=1, core=0, tau=1.0, seed=0)


def test_mean_relevance():
    assert mean_relevance([0, 2], RELEVANCE) == pytest.approx(0.8)
    assert mean_relevance([], RELEVANCE) == float("-inf")


# --- CCV --------------------------------------------------------------------------------------

TEXTS = {
    "p1": "BRCA1 mutations raise the risk of breast cancer.",
    "p2": "Unrelated abstract about zebrafish fins.",
    "p3": "Another abstract.",
    "p4": "The  drug  Imatinib inhibits BCR-ABL kinase activity.",
}


def member(answer, index, quote=None, order=("p1", "p2", "p3", "p4")):
    return CitedAnswer(answer=answer, index=index, quote=quote, order=tuple(order))


def test_ccv_prefers_consistent_citations_over_majority():
    members = [
        member("a", 1),
        member("a", 2),
        member("a", 3),
        member("b", 4),
        member("b", 4),
    ]
    result = ccv_select(members, TEXTS)
    assert result["winner"] == "b"  # plain majority would pick "a"
    assert result["table"] == [
        {"answer": "b", "score": 2, "frequency": 2, "pmid": "p4"},
        {"answer": "a", "score": 1, "frequency": 3, "pmid": "p1"},
    ]
    assert result["valid"] == [True] * 5
    assert result["cited"] == ["p1", "p2", "p3", "p4", "p4"]
    assert result["citation_agreement"] == pytest.approx(2 / 5)
    json.dumps(result)


def test_ccv_maps_indices_through_each_members_permutation():
    members = [
        member("x", 1, order=("p4", "p1", "p2")),
        member("x", 2, order=("p1", "p4", "p2")),
        member("x", 3, order=("p2", "p1", "p4")),
    ]
    result = ccv_select(members, TEXTS)
    assert result["cited"] == ["p4", "p4", "p4"]
    assert result["table"][0] == {"answer": "x", "score": 3, "frequency": 3, "pmid": "p4"}
    assert result["citation_agreement"] == 1.0


def test_strict_mode_checks_the_quote_and_the_answer():
    grounded = member("imatinib", 4, quote="the drug imatinib   inhibits")
    invented = member("imatinib", 4, quote="imatinib cures everything")
    off_quote = member("dasatinib", 4, quote="inhibits BCR-ABL kinase")
    no_quote = member("imatinib", 4, quote=None)
    members = [grounded, invented, off_quote, no_quote]
    assert ccv_select(members, TEXTS, strict=True)["valid"] == [True, False, False, False]
    assert ccv_select(members, TEXTS)["valid"] == [True, True, True, True]


def test_strict_mode_looks_in_the_cited_document_only():
    quote = "BRCA1 mutations raise the risk"
    wrong_doc = member("brca1", 2, quote=quote)
    right_doc = member("brca1", 1, quote=quote)
    assert ccv_select([wrong_doc, right_doc], TEXTS, strict=True)["valid"] == [False, True]


@pytest.mark.parametrize("index", [0, 5, -1, None])
def test_an_out_of_range_index_is_invalid(index):
    result = ccv_select([member("a", index)], TEXTS)
    assert result["valid"] == [False]
    assert result["cited"] == [None]
    assert result["citation_agreement"] == 0.0


def test_equal_scores_go_to_the_more_frequent_answer():
    members = [member("a", 1), member("b", 2), member("b", None), member("a", 3)]
    members.append(member("b", 9))
    result = ccv_select(members, TEXTS)
    assert [(r["answer"], r["score"], r["frequency"]) for r in result["table"]] == [
        ("b", 1, 3),
        ("a", 1, 2),
    ]
    assert result["winner"] == "b"


def test_full_ties_go_to_the_first_answer_seen():
    result = ccv_select([member("b", 2), member("a", 1)], TEXTS)
    assert result["winner"] == "b"


def test_modal_pmid_ties_go_to_the_pmid_cited_first():
    members = [member("a", 3), member("a", 1), member("a", 1), member("a", 3)]
    assert ccv_select(members, TEXTS)["table"][0]["pmid"] == "p3"


def test_empty_answers_never_win():
    members = [member("", 1), member("", 1), member("", 1), member("a", None)]
    result = ccv_select(members, TEXTS)
    assert result["winner"] == "a"
    assert result["valid"] == [False, False, False, False]
    assert [row["answer"] for row in result["table"]] == ["a"]


def test_no_answers_give_no_winner():
    assert ccv_select([], TEXTS) == {
        "winner": None,
        "table": [],
        "valid": [],
        "cited": [],
        "citation_agreement": 0.0,
    }
    assert ccv_select([member("", 1)], TEXTS)["winner"] is None


# --- MoI --------------------------------------------------------------------------------------

UTILITIES = np.array([-3.0, -1.0, -2.5, -0.5, -2.0, -1.5])


def planted(n):
    weights = 0.6 ** np.arange(n)  # decreasing: a primacy bias
    return weights / weights.sum(), UTILITIES[:n]


def observe(perms, weights, utilities):
    return np.array([sum(weights[j] * utilities[k] for j, k in enumerate(p)) for p in perms])


def assert_constraints(fit):
    assert fit.weights.sum() == pytest.approx(1.0, abs=1e-6)
    assert np.all(fit.weights >= 0.0)
    assert np.all(fit.weights <= 1.0)


def test_cyclic_scheme_is_the_n_shifts():
    assert moi_permutations(4, "cyclic") == [
        [0, 1, 2, 3],
        [1, 2, 3, 0],
        [2, 3, 0, 1],
        [3, 0, 1, 2],
    ]


def test_prefix_scheme_truncates_the_shifts():
    assert moi_permutations(4, "prefix", prefix_length=2) == [[0, 1], [1, 2], [2, 3], [3, 0]]
    assert moi_permutations(2, "prefix", prefix_length=5) == [[0, 1], [1, 0]]


def test_random_scheme_gives_3n_distinct_seeded_permutations():
    perms = moi_permutations(5, "random", seed=4)
    assert len(perms) == 15
    assert len({tuple(p) for p in perms}) == 15
    assert all(sorted(p) == list(range(5)) for p in perms)
    assert perms == moi_permutations(5, "random", seed=4)
    assert perms != moi_permutations(5, "random", seed=5)


def test_random_scheme_enumerates_when_there_are_fewer_than_3n():
    assert moi_permutations(3, "random") == [list(p) for p in itertools.permutations(range(3))]
    assert moi_permutations(1, "random") == [[0]]
    assert len(moi_permutations(4, "random")) == 12


@pytest.mark.parametrize(
    ("n", "scheme", "kwargs"),
    [(4, "sorted", {}), (0, "cyclic", {}), (3, "prefix", {"prefix_length": 0})],
)
def test_moi_permutations_rejects_bad_arguments(n, scheme, kwargs):
    with pytest.raises(ValueError):
        moi_permutations(n, scheme, **kwargs)


@pytest.mark.parametrize("n", [5, 6])
@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_planted_weights_and_utilities_are_recovered(n, noise):
    # A weak ridge toward the true utilities only picks the spread the data leave open.
    weights, utilities = planted(n)
    perms = moi_permutations(n, "random", seed=n)
    rng = np.random.default_rng(n)
    obs = observe(perms, weights, utilities) + rng.normal(0.0, noise, len(perms))
    fit = moi_solve(perms, obs, n, prior=utilities, ridge=1e-3, seed=n)
    assert_constraints(fit)
    assert np.abs(fit.weights - weights).max() < 0.05
    assert np.abs(fit.utilities - utilities).max() < 0.05
    assert fit.residual < (len(perms) * noise**2) * 4 + 1e-9


@pytest.mark.parametrize("n", [5, 6])
def test_recovery_with_a_noisy_prior_not_the_truth(n):
    # The prior is only near the truth (as a retriever's scores are): the data fix everything
    # but the spread, and a noisy prior still picks it closely enough.
    weights, utilities = planted(n)
    perms = moi_permutations(n, "random", seed=n)
    obs = observe(perms, weights, utilities)
    prior = utilities + np.random.default_rng(7).normal(0.0, 0.05, n)
    fit = moi_solve(perms, obs, n, prior=prior, ridge=1e-3, seed=n)
    assert_constraints(fit)
    assert np.abs(fit.weights - weights).max() < 0.05
    assert np.abs(fit.utilities - utilities).max() < 0.05


def test_full_orderings_fix_the_fit_only_up_to_its_spread():
    n = 5
    weights, utilities = planted(n)
    perms = moi_permutations(n, "random", seed=2)
    obs = observe(perms, weights, utilities)
    for t in (0.5, -0.5):  # a' = ā + t(a − ā), u' = ū + (u − ū)/t predict the same
        other = 1 / n + t * (weights - 1 / n)
        spread = utilities.mean() + (utilities - utilities.mean()) / t
        assert np.allclose(observe(perms, other, spread), obs)
    fit = moi_solve(perms, obs, n, seed=0)
    assert_constraints(fit)
    assert fit.residual < 1e-12
    t = (fit.weights[0] - 1 / n) / (weights[0] - 1 / n)
    expected = utilities.mean() + (utilities - utilities.mean()) / t
    assert np.allclose(fit.utilities, expected, atol=1e-5)
    assert fit.order() == [3, 1, 4, 2, 0]  # the pairing of ranks is identified


@pytest.mark.parametrize("n", [5, 6])
def test_cyclic_scheme_with_the_retriever_prior(n):
    weights, utilities = planted(n)
    perms = moi_permutations(n, "cyclic")
    fit = moi_solve(perms, observe(perms, weights, utilities), n, prior=utilities, ridge=0.1)
    assert_constraints(fit)
    assert len(fit.weights) == n
    assert np.argsort(-fit.utilities).tolist() == np.argsort(-utilities).tolist()


def test_prefix_scheme_fits_one_weight_per_shown_position():
    n = 6
    weights, utilities = planted(3)[0], UTILITIES
    perms = moi_permutations(n, "prefix", prefix_length=3)
    fit = moi_solve(perms, observe(perms, weights, utilities), n, prior=utilities, ridge=0.1)
    assert_constraints(fit)
    assert len(fit.weights) == 3
    assert len(fit.utilities) == n
    order = fit.order()
    assert sorted(order) == list(range(n))
    assert order[int(np.argmax(fit.weights))] == int(np.argmax(fit.utilities))


def test_observations_are_fitted_on_their_own_scale():
    n = 5
    weights, utilities = planted(n)
    perms = moi_permutations(n, "random", seed=1)
    obs = observe(perms, weights, utilities)
    base = moi_solve(perms, obs, n, prior=utilities, ridge=1e-3)
    moved = moi_solve(perms, 10 * obs - 40, n, prior=10 * utilities - 40, ridge=1e-3)
    assert np.allclose(moved.weights, base.weights, atol=1e-4)
    assert np.allclose(moved.utilities, 10 * base.utilities - 40, atol=1e-3)


def test_order_puts_the_best_passage_at_the_heaviest_position():
    fit = MoIFit(
        weights=np.array([0.2, 0.1, 0.3, 0.4]),
        utilities=np.array([-1.0, -4.0, -0.5, -3.0]),
        residual=0.0,
    )
    # Positions by weight: 3, 2, 0, 1; passages by utility: 2, 0, 3, 1.
    assert fit.order() == [3, 1, 0, 2]


def test_order_fills_positions_beyond_the_weights_by_utility():
    fit = MoIFit(
        weights=np.array([0.3, 0.7]),
        utilities=np.array([-1.0, -4.0, -0.5, -3.0, -2.0]),
        residual=0.0,
    )
    assert fit.order() == [0, 2, 4, 3, 1]


@pytest.mark.parametrize(
    ("perms", "obs", "kwargs", "message"),
    [
        ([[0, 1], [1, 0]], [1.0], {}, "observations"),
        ([[0, 3], [1, 0]], [1.0, 2.0], {}, "outside"),
        ([[0, 0], [1, 0]], [1.0, 2.0], {}, "repeats"),
        ([[], [1, 0]], [1.0, 2.0], {}, "empty"),
        ([], [], {}, "at least one"),
        ([[0, 1], [1, 0]], [1.0, math.inf], {}, "finite"),
        ([[0, 1], [1, 0]], [1.0, 2.0], {"prior": [1.0]}, "prior"),
        ([[0, 1], [1, 0]], [1.0, 2.0], {"ridge": -1.0}, "ridge"),
    ],
)
def test_moi_solve_rejects_bad_input(perms, obs, kwargs, message):
    with pytest.raises(ValueError, match=message):
        moi_solve(perms, obs, 2, **kwargs)
