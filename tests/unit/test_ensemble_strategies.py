"""Ensemble strategies as arithmetic: Context Bagging, citation-consistent voting, MoI."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from nodes.ensemble.strategies import (
    CitedAnswer,
    MoIFit,
    ccv_select,
    cobag_views,
    mean_relevance,
    moi_flat,
    moi_permutations,
    moi_solve,
    orient,
    variable_lengths,
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


def test_noshuffle_keeps_rank_order_and_draws_the_same_bags():
    # CoBag-NoShuffle (Table 2) removes step 3 only: the same contexts, never reordered.
    kwargs = {"members": 12, "size": 4, "core": 1, "tau": 0.5, "seed": 9}
    shuffled = cobag_views(RELEVANCE, **kwargs)
    ranked = cobag_views(RELEVANCE, shuffle=False, **kwargs)
    assert [sorted(v) for v in shuffled] == ranked
    assert any(v != sorted(v) for v in shuffled)
    small = cobag_views([0.3, 0.1, 0.2], members=3, size=5, core=1, tau=1.0, seed=0, shuffle=False)
    assert small == [[0, 1, 2]] * 3


def test_uniform_sampling_ignores_relevance_but_keeps_the_core():
    # CoBag-Uniform (Table 2): the m - r non-core contexts drawn with equal probability.
    tau = 0.05  # relevance sampling would all but always draw context 4 (0.8) here
    draws = cobag_views(
        RELEVANCE, members=20_000, size=2, core=1, tau=tau, seed=5, sampling="uniform"
    )
    assert all(0 in view for view in draws)
    sampled = [next(i for i in view if i != 0) for view in draws]
    counts = np.bincount(sampled, minlength=len(RELEVANCE))[1:]
    assert np.abs(counts / counts.sum() - 1 / 7).max() < 0.02


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"members": 2, "size": 3, "core": 1, "tau": 1.0, "sampling": "softmax"}, "sampling"),
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


VERBATIM = {
    "p1": "The White House stands in Washington, D.C., on Pennsylvania Avenue.",
    "p2": "Eugene O'Neill won the Nobel Prize in Literature in 1936.",
    "p3": "Serum Interleukin-6 (IL-6) rose after surgery; IL-60 did not.",
}


@pytest.mark.parametrize(
    ("written", "index", "quote"),
    [
        ("Washington, D.C.", 1, "stands in Washington, D.C., on"),
        ("O'Neill", 2, "Eugene O'Neill won the Nobel Prize"),
        ("Interleukin-6 (IL-6)", 3, "Serum Interleukin-6 (IL-6) rose after surgery"),
        ("interleukin 6", 3, "serum  INTERLEUKIN-6 (IL-6) rose"),  # case and spaces only
    ],
)
def test_strict_mode_accepts_a_verbatim_quote_of_a_punctuated_answer(written, index, quote):
    from infra.bioasq import normalize_answer

    key = normalize_answer(written)  # what the node votes by
    grounded = CitedAnswer(key, index, quote, ("p1", "p2", "p3"), text=written)
    assert ccv_select([grounded], VERBATIM, strict=True)["valid"] == [True]


def test_strict_mode_matches_answers_on_word_boundaries_and_quotes_verbatim():
    order = ("p1", "p2", "p3")
    partial = CitedAnswer("il 6", 3, "IL-60 did not", order, text="IL-6")  # IL-6 is not IL-60
    paraphrase = CitedAnswer("il 6", 3, "Serum IL-6 rose", order, text="IL-6")  # not verbatim
    assert ccv_select([partial, paraphrase], VERBATIM, strict=True)["valid"] == [False, False]


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


def test_full_ties_go_to_the_first_answer_seen_not_to_the_retriever_s_rank():
    # The paper breaks ties by frequency only; the retriever's rank of the cited document is
    # no rule of its (an earlier quorum used it, chosen on its own simulator).
    assert ccv_select([member("b", 2), member("a", 1)], TEXTS)["winner"] == "b"
    assert ccv_select([member("a", 1), member("b", 2)], TEXTS)["winner"] == "a"


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


# --- MoI ---------------------------------------------------------------------------------------

UTILITIES = np.array([-3.0, -1.0, -2.5, -0.5, -2.0, -1.5])


def planted(n, curve="primacy"):
    """Return position weights (summing to 1) of a primacy, recency or U bias, and utilities."""
    x = np.arange(n) / (n - 1)
    shape = {"primacy": 1 - 0.8 * x, "recency": 1 - 0.8 * (1 - x), "u": 0.3 + 3 * (x - 0.45) ** 2}
    weights = shape[curve]
    return weights / weights.sum(), UTILITIES[:n]


def observe(perms, weights, utilities):
    return np.array([sum(weights[j] * utilities[k] for j, k in enumerate(p)) for p in perms])


def rho(x, y):
    return spearmanr(x, y).statistic


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


def test_variable_pruning_cuts_each_shift_by_the_retriever_scores():
    # Equal scores: every shift keeps prefix_length passages (fixed pruning).
    assert variable_lengths([0.5] * 5, 2) == [2, 2, 2, 2, 2]
    # A shift opening on the best passages is cut early; one opening on weak ones reads on.
    scores = [0.9, 0.8, 0.1, 0.0, 0.05]
    lengths = variable_lengths(scores, 2)
    assert lengths[0] < lengths[2] and lengths[0] < lengths[3]
    perms = moi_permutations(5, "variable", prefix_length=2, scores=scores)
    assert [len(p) for p in perms] == lengths
    assert [p[0] for p in perms] == [0, 1, 2, 3, 4]  # the cyclic shifts of the rank order
    with pytest.raises(ValueError, match="retriever score"):
        moi_permutations(5, "variable")


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


@pytest.mark.parametrize("curve", ["primacy", "recency", "u"])
@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_random_orders_recover_the_bias_up_to_the_mirror_and_a_noisy_prior_orients_it(curve, noise):
    # No prior enters the fit: it finds (a, u) up to the mirror the data cannot see; a
    # retriever prior that only ranks roughly like the utilities picks the side.
    n = 6
    weights, utilities = planted(n, curve)
    perms = moi_permutations(n, "random", seed=n)
    obs = observe(perms, weights, utilities) + np.random.default_rng(n).normal(0, noise, len(perms))
    fit = moi_solve(perms, obs, n, seed=n)
    assert_constraints(fit)
    assert fit.residual < len(perms) * noise**2 * 4 + 1e-9
    assert abs(rho(fit.weights, weights)) > 0.9 and abs(rho(fit.utilities, utilities)) > 0.9
    prior = [-3.2, -0.2, -2.0, -0.9, -2.9, -1.0]  # a retriever's view: right only roughly
    assert 0.5 < rho(prior, utilities) < 1.0
    oriented, how = orient(fit, perms, n, prior)
    assert how == "retriever prior"
    assert rho(oriented.weights, weights) > 0.9 and rho(oriented.utilities, utilities) > 0.9
    assert oriented.residual == fit.residual  # the same predictions
    assert np.allclose(observe(perms, oriented.weights, oriented.utilities), obs - 0, atol=0.1)


def test_without_a_prior_the_paper_s_primacy_orients_the_fit():
    n = 5
    weights, utilities = planted(n, "primacy")
    perms = moi_permutations(n, "random", seed=3)
    fit = moi_solve(perms, observe(perms, weights, utilities), n)
    for prior in (None, [1.0] * n):  # none, or one that says nothing
        oriented, how = orient(fit, perms, n, prior)
        assert how.startswith("primacy")
        assert rho(oriented.weights, weights) > 0.9


def test_the_mirror_predicts_full_orders_alike_and_reverses_both_rankings():
    n = 5
    weights, utilities = planted(n, "u")
    perms = moi_permutations(n, "random", seed=2)
    obs = observe(perms, weights, utilities)
    fit = moi_solve(perms, obs, n, seed=0)
    mirror = fit.flipped()
    assert_constraints(mirror)
    assert np.allclose(observe(perms, mirror.weights, mirror.utilities), obs, atol=1e-6)
    assert rho(mirror.weights, fit.weights) == pytest.approx(-1.0)
    assert rho(mirror.utilities, fit.utilities) == pytest.approx(-1.0)
    assert mirror.order() == fit.order()  # pairing ranks does not depend on the side


def test_truncated_orders_identify_the_fit_without_any_prior():
    # A passage left out of an order adds nothing, which breaks the mirror: weights and
    # utilities come back exactly, and orienting leaves them alone.
    n, length = 6, 3
    weights = planted(length, "primacy")[0]
    rng = np.random.default_rng(0)
    perms = [rng.permutation(n)[:length].tolist() for _ in range(4 * n)]
    fit = moi_solve(perms, observe(perms, weights, UTILITIES), n, seed=1)
    assert_constraints(fit)
    assert np.abs(fit.weights - weights).max() < 0.02
    assert np.abs(fit.utilities - UTILITIES).max() < 0.05
    assert orient(fit, perms, n, [0.0] * n) == (fit, "prefix orders (the data fix it)")


def test_cyclic_orders_fit_exactly_but_leave_the_bias_open():
    # n equations for 2n - 1 unknowns: the paper's weakest proposal (Table 6).
    n = 5
    weights, utilities = planted(n)
    perms = moi_permutations(n, "cyclic")
    fit = moi_solve(perms, observe(perms, weights, utilities), n)
    assert_constraints(fit)
    assert fit.residual < 1e-8
    assert np.abs(fit.weights - weights).max() > 0.01  # not the planted weights


def test_prefix_scheme_fits_one_weight_per_shown_position():
    n = 6
    perms = moi_permutations(n, "prefix", prefix_length=3)
    fit = moi_solve(perms, observe(perms, planted(3)[0], UTILITIES), n)
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
    base = moi_solve(perms, obs, n)
    moved = moi_solve(perms, 10 * obs - 40, n)
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
    assert fit.order("descending") == [2, 0, 3, 1]  # the paper's literal rule


def test_order_fills_positions_beyond_the_weights_by_utility():
    fit = MoIFit(
        weights=np.array([0.3, 0.7]),
        utilities=np.array([-1.0, -4.0, -0.5, -3.0, -2.0]),
        residual=0.0,
    )
    assert fit.order() == [0, 2, 4, 3, 1]


@pytest.mark.parametrize(
    ("perms", "obs", "message"),
    [
        ([[0, 1], [1, 0]], [1.0], "observations"),
        ([[0, 3], [1, 0]], [1.0, 2.0], "outside"),
        ([[0, 0], [1, 0]], [1.0, 2.0], "repeats"),
        ([[], [1, 0]], [1.0, 2.0], "empty"),
        ([], [], "at least one"),
        ([[0, 1], [1, 0]], [1.0, math.inf], "finite"),
    ],
)
def test_moi_solve_rejects_bad_input(perms, obs, message):
    with pytest.raises(ValueError, match=message):
        moi_solve(perms, obs, 2)


def test_flat_weights_over_full_orders_tie_every_passage_and_keep_the_rank_order():
    # MoI's control: a = 1/N, u = the mean observation of the orders showing the passage.
    # Every full order shows every passage, so nothing separates them.
    weights, utilities = planted(5)
    perms = moi_permutations(5, "random", seed=2)
    fit = moi_flat(perms, observe(perms, weights, utilities), 5)
    assert np.allclose(fit.weights, 0.2)
    assert len(set(fit.utilities.tolist())) == 1
    assert fit.order("descending") == [0, 1, 2, 3, 4]


def test_flat_weights_over_prefix_orders_are_plain_mean_likelihoods():
    perms = [[0, 1], [1, 2], [2, 0]]
    obs = [1.0, 3.0, 5.0]
    fit = moi_flat(perms, obs, 4)
    assert fit.utilities.tolist() == [3.0, 2.0, 4.0, 3.0]  # passage 3 unseen: the mean
    assert fit.order("descending") == [2, 0, 3, 1]
