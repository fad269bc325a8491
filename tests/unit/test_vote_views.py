"""Ensemble voting by question type, and the permuted context views members see."""

from __future__ import annotations

from functools import partial

import pytest

from infra.settings.methods import EnsembleSettings
from nodes.ensemble import vote as voting
from nodes.ensemble.views import permuted_views
from nodes.seeds import question_seed

vote = partial(voting.vote, list_quorum=EnsembleSettings().list_quorum)
"""The vote at the configured list quorum, read from settings: the default stated once."""

# --- vote -------------------------------------------------------------------------------------


def test_yesno_majority_wins():
    result = vote("yesno", [["yes"], ["no"], ["Yes"]])
    assert result["ranked"] == ["yes"]
    assert [(r["normalized"], r["votes"]) for r in result["table"]] == [("yes", 2), ("no", 1)]


def test_yesno_keeps_a_single_answer():
    assert vote("yesno", [["no"], ["no"], ["yes"]])["ranked"] == ["no"]


def test_factoid_ranks_by_votes_first():
    result = vote("factoid", [["ENaC", "CFTR"], ["CFTR", "SCNN1A"], ["SCNN1A", "CFTR"]])
    assert result["ranked"] == ["CFTR", "SCNN1A", "ENaC"]


def test_factoid_breaks_vote_ties_by_best_rank():
    # One vote each: APC sorts first alphabetically but was only ever ranked second.
    result = vote("factoid", [["ZEB1", "APC"], ["MYC"]])
    assert result["ranked"] == ["MYC", "ZEB1", "APC"]


def test_factoid_votes_outweigh_rank():
    result = vote("factoid", [["TP53", "KRAS"], ["MYC", "KRAS"]])
    assert result["ranked"][0] == "KRAS"


def test_factoid_keeps_at_most_five():
    result = vote("factoid", [["a1", "b1", "c1", "d1", "e1", "f1", "g1"]])
    assert result["ranked"] == ["a1", "b1", "c1", "d1", "e1"]
    assert result["distinct"] == 7


def test_normalisation_merges_surface_variants():
    result = vote("factoid", [["The CFTR gene"], ["cftr gene"], ["CFTR Gene.", "ENaC"]])
    assert result["table"][0]["normalized"] == "cftr gene"
    assert result["table"][0]["votes"] == 3
    assert result["distinct"] == 2


def test_most_common_surface_form_is_reported():
    result = vote("factoid", [["cftr gene"], ["The CFTR gene"], ["The CFTR gene"]])
    assert result["ranked"] == ["The CFTR gene"]


def test_a_member_naming_an_answer_twice_votes_once():
    result = vote("factoid", [["CFTR", "cftr", "CFTR."], ["ENaC"]])
    assert {r["normalized"]: r["votes"] for r in result["table"]} == {"cftr": 1, "enac": 1}
    assert result["ranked"] == ["CFTR", "ENaC"]


def test_blank_answers_are_ignored():
    result = vote("factoid", [["", "  ", "the", "CFTR"]])
    assert result["ranked"] == ["CFTR"]
    assert result["distinct"] == 1


def test_list_keeps_items_named_by_at_least_half_the_members():
    answers = [["a1", "b1", "c1"], ["a1", "b1"], ["a1", "d1"], ["e1"]]
    result = vote("list", answers)
    assert result["ranked"] == ["a1", "b1"]
    assert result["distinct"] == 5


def test_list_quorum_is_configurable():
    answers = [["a1", "b1", "c1"], ["a1", "b1"], ["a1", "d1"], ["e1"]]
    assert vote("list", answers, list_quorum=0.75)["ranked"] == ["a1"]
    assert len(vote("list", answers, list_quorum=0.0)["ranked"]) == 5


def test_list_without_quorum_keeps_the_top_item():
    answers = [["p1", "q1"], ["q1", "t1"], ["r1"], ["s1"], ["u1"]]
    result = vote("list", answers)
    assert result["ranked"] == ["q1"]


def test_summary_keeps_every_answer():
    result = vote("summary", [["Aspirin lowers risk."], ["Aspirin reduces incidence."]])
    assert result["ranked"] == ["Aspirin lowers risk.", "Aspirin reduces incidence."]


@pytest.mark.parametrize("answers", [[], [[]], [[], []]])
def test_no_answers_give_an_empty_result(answers):
    assert vote("factoid", answers) == {
        "ranked": [],
        "table": [],
        "agreement": 0.0,
        "distinct": 0,
        "members": 0,
    }


def test_members_without_an_answer_do_not_count():
    result = vote("yesno", [["yes"], [], ["yes"]])
    assert result["members"] == 2
    assert result["agreement"] == 1.0


def test_agreement_is_the_top_share_of_members():
    result = vote("yesno", [["yes"], ["no"], ["yes"]])
    assert result["agreement"] == 0.667
    assert result["members"] == 3
    assert result["distinct"] == 2


def test_table_rows_hold_answer_votes_and_normalized_form():
    result = vote("factoid", [["The CFTR gene"]])
    assert result["table"] == [{"answer": "The CFTR gene", "votes": 1, "normalized": "cftr gene"}]


# --- views ------------------------------------------------------------------------------------


def test_first_view_is_the_rank_order():
    assert permuted_views(10, 3, 5, seed=1)[0] == [0, 1, 2, 3, 4]


def test_k_views_of_the_top_m_passages():
    views = permuted_views(10, 4, 5, seed=1)
    assert len(views) == 4
    assert all(sorted(view) == [0, 1, 2, 3, 4] for view in views)


def test_views_are_distinct_when_possible():
    views = permuted_views(10, 8, 5, seed=3)
    assert len({tuple(v) for v in views}) == 8


def test_three_passages_give_all_six_orders_before_repeating():
    views = permuted_views(3, 10, 5, seed=7)
    assert len({tuple(v) for v in views[:6]}) == 6
    assert len(views) == 10


def test_views_are_deterministic_for_a_seed():
    assert permuted_views(10, 5, 5, seed=42) == permuted_views(10, 5, 5, seed=42)


def test_views_differ_between_seeds():
    assert permuted_views(10, 5, 5, seed=1) != permuted_views(10, 5, 5, seed=2)


def test_fewer_passages_than_m_uses_them_all():
    views = permuted_views(3, 2, 5, seed=1)
    assert views[0] == [0, 1, 2]
    assert all(sorted(view) == [0, 1, 2] for view in views)


def test_one_passage_gives_k_identical_views():
    assert permuted_views(1, 3, 5, seed=1) == [[0], [0], [0]]


def test_two_passages_give_k_views_of_both():
    views = permuted_views(2, 4, 5, seed=7)
    assert len(views) == 4
    assert views[0] == [0, 1]
    assert all(sorted(view) == [0, 1] for view in views)
    assert [1, 0] in views


def test_two_passages_and_two_views_are_distinct():
    for seed in range(10):
        assert permuted_views(2, 2, 5, seed=seed) == [[0, 1], [1, 0]]


def test_no_passages_give_k_empty_views():
    assert permuted_views(0, 2, 5, seed=1) == [[], []]


def test_one_view_is_only_the_rank_order():
    assert permuted_views(10, 1, 5, seed=1) == [[0, 1, 2, 3, 4]]


def test_question_seed_is_deterministic():
    assert question_seed(13, "Is aspirin safe?") == question_seed(13, "Is aspirin safe?")


def test_question_seed_depends_on_seed_and_question():
    base = question_seed(13, "Is aspirin safe?")
    assert question_seed(14, "Is aspirin safe?") != base
    assert question_seed(13, "Is metformin safe?") != base


def test_question_seed_is_a_64_bit_unsigned_integer():
    value = question_seed(13, "q")
    assert isinstance(value, int)
    assert 0 <= value < 2**64


def test_weights_break_vote_ties_toward_the_heaviest_supporter():
    assert vote("yesno", [["yes"], ["no"]], weights=[0.2, 0.7])["ranked"] == ["no"]
    assert vote("yesno", [["yes"], ["no"]], weights=[0.9, 0.7])["ranked"] == ["yes"]
    # Weights only break ties: two votes still beat one heavy supporter.
    assert vote("yesno", [["yes"], ["yes"], ["no"]], weights=[0, 0, 9])["ranked"] == ["yes"]


def test_synonym_clusters_join_spacing_initials_and_close_vectors():
    import numpy as np

    from nodes.ensemble.vote import synonym_clusters

    keys = ["il-6", "il6", "tumor necrosis factor", "tnf", "p53", "tp53", "brca1"]
    vectors = np.eye(len(keys))
    vectors[5] = vectors[4]  # p53 and tp53: the embedder says they are the same
    clusters = synonym_clusters(keys, vectors, threshold=0.9)
    assert clusters["il6"] == "il-6" and clusters["tnf"] == "tumor necrosis factor"
    assert clusters["tp53"] == "p53" and clusters["brca1"] == "brca1"
    assert (
        synonym_clusters(keys, None, threshold=0.9)["tp53"] == "tp53"
    )  # without vectors, names only
