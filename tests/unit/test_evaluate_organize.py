import json

import pytest

from infra.bioasq.formats import FormatError
from lab.trials import datasets
from lab.trials.datasets import MethodCase, Passage
from lab.trials.organize import (
    Case,
    evaluate_organize,
    load_cases,
    score_case,
    without_counterfactual,
)
from lab.trials.organize_measures import (
    GATE,
    answered_confidently,
    answered_plurally_or_below_gate,
    disambig_f1,
    organization_scores,
    span_f1,
    token_recall,
)
from nodes.organize.aggregate import aggregate
from tests.support.data import CONFLICTQA, GOLDEN
from tests.support.fakes import pmids_in, script

CASE = Case(
    question="Is coffee harmful?",
    contexts=[
        {"pmid": "1", "title": "", "abstract": "Coffee raises blood pressure."},
        {"pmid": "2", "title": "", "abstract": "Coffee lowers mortality."},
    ],
    items=[
        {"answer": "coffee is harmful", "entity": None, "sources": ["1"]},
        {"answer": "coffee is not harmful", "entity": None, "sources": ["2"]},
    ],
    conflicts=[("1", "2")],
)


def test_token_recall():
    assert token_recall("coffee is harmful", "Harmful? Coffee is.") == 1.0
    assert token_recall("coffee is not harmful", "coffee is harmful") == 0.75
    assert token_recall("", "x") == 0.0


def test_score_rewards_answers_kept_apart_with_their_sources():
    apart = {
        "groups": [
            {"pmids": ["1"], "answer": "Coffee is harmful.", "cited": ["1"]},
            {"pmids": ["2"], "answer": "Coffee is not harmful.", "cited": ["2"]},
        ],
        "relations": [{"a": "1", "b": "2", "label": "counterfactual"}],
        "relation_graph": {"calls": 1, "naive_calls": 1},
        "calls": [{"output_tokens": 7, "input_tokens": 40}],
    }
    scored = score_case(CASE, apart)
    assert (
        scored["answer_recall"] == 1.0
        and scored["ear"] == 1.0
        and scored["counterfactual_split"] == 1.0
    )
    assert scored["relation_calls"] == 1 and scored["output_tokens"] == 7
    merged = {
        "groups": [{"pmids": ["1", "2"], "answer": "Coffee is harmful.", "cited": []}],
        "calls": [],
    }
    scored = score_case(CASE, merged)
    assert scored["counterfactual_split"] == 0.0 and scored["ear"] < 1.0
    assert scored["naive_relation_calls"] == 1


def test_span_f1_is_what_a_perfect_extractive_reader_scores():
    assert span_f1("the cat sat", "Yes: a cat sat on the mat.") == 1.0
    # The best span ("coffee is harmful") misses "not": precision 1, recall 3/4.
    assert span_f1("coffee is not harmful", "Coffee is harmful.") == pytest.approx(6 / 7)
    assert span_f1("x", "") == span_f1("", "x") == 0.0
    # Tokens scattered among other words score below their recall (1): the best span is "red".
    assert token_recall("red wine", "red and white and rosé wine") == 1.0
    assert span_f1("red wine", "red and white and rosé wine") == pytest.approx(2 / 3)
    items = [{"answer": ["Röntgen", "Wilhelm Röntgen"]}, {"answer": "Lorentz"}]
    assert disambig_f1(items, "Wilhelm Röntgen (1901); also named: none") == 0.5


def test_splits_and_collapses_are_scored_by_sides():
    conflicts = [(a, b) for a in "12" for b in "34"]
    duplicates = [("1", "2"), ("3", "4")]
    assert organization_scores([["1"], ["3"]], conflicts, duplicates) == {
        "counterfactual_split": 1.0,
        "duplicate_collapse": 1.0,
    }
    # A side's duplicate with the other side in one group: that side is not apart.
    mixed = organization_scores([["1"], ["2", "3"]], conflicts, duplicates)
    assert mixed == {"counterfactual_split": 0.0, "duplicate_collapse": 0.5}
    # Dropping a whole side splits nothing; an unlabelled pair is not split where labels exist.
    assert organization_scores([["1"]], conflicts, [])["counterfactual_split"] == 0.0
    labelled = [{"a": "1", "b": "3", "label": "counterfactual"}]
    assert (
        organization_scores([["1"], ["3"]], [("1", "3")], [], labelled)["counterfactual_split"]
        == 1.0
    )
    assert (
        organization_scores([["1"], ["3"]], [("1", "4")], [], labelled)["counterfactual_split"]
        == 0.0
    )
    assert organization_scores([["1"]], [], []) == {
        "counterfactual_split": None,
        "duplicate_collapse": None,
    }


def test_load_conflictqa_and_bioasq(tmp_path):
    cases = load_cases(CONFLICTQA)
    assert len(cases) == 30
    first = cases[0]
    shown = [c["pmid"] for c in first.contexts]
    assert shown == ["80000100", "80000102", "80000101", "80000103"]
    assert first.duplicates == [("80000100", "80000101"), ("80000102", "80000103")]
    assert len(first.conflicts) == 4 and first.qtype == "summary"
    assert [i["sources"] for i in first.items] == [list(p) for p in first.duplicates]
    assert first.contexts[1]["abstract"].startswith("Recent studies have shown")
    bioasq = load_cases(GOLDEN)
    assert len(bioasq) == 14 and all(c.items and c.contexts for c in bioasq)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    with pytest.raises(FormatError, match=r"bad\.jsonl:1: not a ConflictQA record"):
        load_cases(bad)


async def test_evaluate_corg_on_a_conflict(make_context, settings):
    corg = settings.model_copy(
        update={"organize": settings.organize.model_copy(update={"strategy": "corg"})}
    )
    triple = {"answer": "harmful", "entity": "coffee", "descriptor": "adults"}
    model = script(
        relation={
            "first": triple,
            "second": {**triple, "answer": "not harmful"},
            "label": "counterfactual",
        },
        group=lambda m, kw: {
            "answer": "Coffee is harmful."
            if "blood pressure" in m[-1].content
            else "Coffee is not harmful.",
            "cited_pmids": pmids_in(m)[:1],
        },
    )
    report = await evaluate_organize(make_context(model, settings_=corg), [CASE])
    assert report["counterfactual_split"] == 1.0 and report["ear"] == 1.0
    assert report["relation_calls"] == 1 == report["naive_relation_calls"]
    assert json.dumps(report)
    assert report["relation_call_ratio"] == 1.0 and report["groups"] == 2


async def test_random_matches_corg_group_count_per_question(make_context, settings):
    random = settings.model_copy(
        update={
            "organize": settings.organize.model_copy(update={"strategy": "random", "groups": 1})
        }
    )
    triple = {"answer": "harmful", "entity": "coffee", "descriptor": "adults"}
    model = script(
        relation={"first": triple, "second": triple, "label": "counterfactual"},
        group=lambda m, kw: {"answer": "Coffee.", "cited_pmids": pmids_in(m)[:1]},
    )
    ctx = make_context(model, settings_=random)
    alone = await evaluate_organize(ctx, [CASE])
    assert alone["groups"] == 1  # organize.groups as configured
    matched = await evaluate_organize(ctx, [CASE], match_corg=True)
    assert matched["groups"] == 2 and matched["strategy"] == "random"  # CORG split the pair
    assert matched["relation_calls"] == 0  # the reference CORG run is not the one scored


def test_bioasq_cases_count_snippets_and_pairs_before_the_cap():
    cases = load_cases(GOLDEN)
    big = next(c for c in cases if len(c.contexts) > 10)
    assert big.snippets >= len(big.contexts)
    n = len(big.contexts)
    scored = score_case(big, {"groups": [], "relation_graph": {"calls": 45}, "calls": []})
    assert scored["naive_relation_calls"] == n * (n - 1) // 2 > 45


# --- how a case was answered, and its variant without the counterfactual ----------------------


def group(pmids: list[str], answer: str, cited: list[str]) -> dict:
    return {
        "pmids": pmids,
        "question": "q",
        "answer": answer,
        "cited": cited,
        "error": None,
        "exact": [answer],
        "covers": pmids,
    }


def test_a_conflict_is_plural_and_an_agreement_confident():
    conflict = aggregate(
        [group(["1", "3", "5"], "yes", ["1"]), group(["2", "4"], "no", ["2"])], "yesno"
    )
    agree = aggregate([group(["1", "3"], "yes", ["1"]), group(["2"], "yes", ["2"])], "yesno")
    # Vote mode: the decision's share is the confidence.
    voted = {"decision": conflict, "answer": {"exact": ["yes"], "confidence": conflict["share"]}}
    assert answered_plurally_or_below_gate(voted) and not answered_confidently(voted)
    # A synthesizer sure of one side does not undo the plural decision.
    sure = voted | {"answer": {"exact": ["yes"], "confidence": 0.9}}
    assert answered_plurally_or_below_gate(sure) and not answered_confidently(sure)
    one = {"decision": agree, "answer": {"exact": ["yes"], "confidence": agree["share"]}}
    assert answered_confidently(one) and not answered_plurally_or_below_gate(one)
    # The final answer's confidence counts too: one answer below the gate is not sure.
    unsure = one | {"answer": {"exact": ["yes"], "confidence": GATE - 0.01}}
    assert answered_plurally_or_below_gate(unsure) and not answered_confidently(unsure)
    assert answered_confidently(one | {"answer": {"exact": ["yes"], "confidence": GATE}})
    # Finalize's result is read when the answer record is gone; nothing at all is unsure.
    assert answered_confidently({"result": {"exact_answer": "yes", "confidence": 0.8}})
    assert answered_plurally_or_below_gate({}) and not answered_confidently({})
    assert not answered_confidently(one | {"answer": {"exact": [], "confidence": 1.0}})


def test_without_counterfactual_keeps_one_side_in_order():
    case = MethodCase(
        id="c1",
        question="Is coffee harmful?",
        qtype="yesno",
        gold=("yes",),
        passages=(
            Passage("13", "c dup", "duplicate", of="12"),
            Passage("10", "gold", "gold"),
            Passage("12", "counter", "counterfactual", "no", "10"),
            Passage("11", "gold dup", "duplicate", of="10"),
        ),
        kind="conflictqa",
    )
    kept = without_counterfactual(case)
    assert [p.pmid for p in kept.passages] == ["10", "11"]
    assert kept.pairs("counterfactual") == [] and kept.pairs("duplicate") == [("11", "10")]
    assert (kept.id, kept.question, kept.gold, kept.kind) == (
        "c1",
        case.question,
        ("yes",),
        "conflictqa",
    )
    assert len(case.passages) == 4  # the case itself is untouched
    for loaded in datasets.load_cases(CONFLICTQA, limit=5):
        one_side = without_counterfactual(loaded)
        assert {p.role for p in one_side.passages} == {"gold", "duplicate"}
        assert len(one_side.passages) == 2
