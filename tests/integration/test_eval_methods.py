"""`quorum eval methods` against the planted reader: each paper's claim holds through the graph.

The reader (infra/simulate) is position-biased and distractor-prone, and its errors come from
its context, never from sampling; so a method that really decides the answer shows the gain
its paper predicts, and one wired wrong (its decision ignored, its views all alike) does not.
The samples are in tests/fixtures/eval_methods (README there: which records, licences).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from graphs.eval.datasets import DISTRACTORS, GOLD_WITHIN, HARD, load_cases, normalize
from graphs.eval.methods import run_methods
from infra.simulate.planted import Plants
from infra.simulate.reader import ReaderSettings
from tests.support.cli import quorum_env, run_quorum
from tests.support.fakes import HashEmbedder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval_methods"
NQ = FIXTURES / "nq_open_sample.jsonl.gz"
CONFLICTQA = FIXTURES / "conflictqa_sample.jsonl"
NQ_QUESTIONS = 60
CONFLICTQA_QUESTIONS = 30
STRATEGIES = ("single", "self_consistency", "permute_vote", "cobag", "ccv", "moi")


def evaluate(home: Path, out: Path, dataset: Path, limit: int, *extra: str) -> tuple[dict, list]:
    """Run the command as a user would; return its report and its rows."""
    rows = out / f"{dataset.stem}.rows.jsonl"
    proc = run_quorum(
        quorum_env(home),
        "eval",
        "methods",
        "--dataset",
        str(dataset),
        "--reader",
        "planted",
        "--limit",
        str(limit),
        "--rows",
        str(rows),
        "--json",
        *extra,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.strip().splitlines()) == 1  # exactly one JSON object
    return json.loads(proc.stdout), [json.loads(line) for line in rows.read_text().splitlines()]


@pytest.fixture(scope="module")
def nq(quorum_home, tmp_path_factory) -> tuple[dict, list]:
    out = tmp_path_factory.mktemp("eval-methods-nq")
    return evaluate(quorum_home, out, NQ, NQ_QUESTIONS, "--strategies", ",".join(STRATEGIES))


@pytest.fixture(scope="module")
def conflictqa(quorum_home, tmp_path_factory) -> tuple[dict, list]:
    out = tmp_path_factory.mktemp("eval-methods-conflictqa")
    return evaluate(quorum_home, out, CONFLICTQA, CONFLICTQA_QUESTIONS, "--strategies", "corg")


def accuracy(report: dict, name: str) -> float:
    return report["strategies"][name]["accuracy"]


def test_nq_cases_plant_a_hard_distractor_beside_the_gold_passage_near_the_top():
    cases = load_cases(NQ, limit=40)
    plants = Plants.load([c.plant() for c in cases])  # the reader accepts every case
    assert len(plants.questions) == 40
    for case in cases:
        roles = [p.role for p in case.passages]
        assert roles.count("gold") == 1 and roles.count("distractor") == HARD
        assert roles.count("irrelevant") == DISTRACTORS - HARD
        assert {"gold", "distractor"} <= set(roles[:GOLD_WITHIN])
        golds = [normalize(g) for g in case.gold]
        for passage in case.passages:
            if passage.role != "gold":
                assert not any(f" {g} " in f" {normalize(passage.text)} " for g in golds)
                assert normalize(passage.answer) not in golds
    positions = {[p.role for p in c.passages].index("gold") for c in cases}
    assert positions == set(range(GOLD_WITHIN))  # the gold is not always first
    assert load_cases(NQ, limit=5, offset=5)[0].id == cases[5].id


def test_conflictqa_cases_plant_two_duplicates_and_a_counterfactual():
    cases = load_cases(CONFLICTQA)
    plants = Plants.load([c.plant() for c in cases])
    for case, planted in zip(cases, plants.questions, strict=True):
        assert len(case.passages) == 4 and case.qtype == "yesno"
        [(counter, gold)] = case.pairs("counterfactual")
        duplicates = case.pairs("duplicate")
        assert len(duplicates) == 2
        for a, b in duplicates:
            assert plants.relation(planted, a, b) == "duplicated"
        assert plants.relation(planted, counter, gold) == "counterfactual"
        answers = {p.role: p.answer for p in case.passages}
        assert answers["counterfactual"] != case.gold[0]


def test_the_report_is_one_object_with_the_reader_and_every_rows_line(nq):
    report, rows = nq
    assert report["reader"]["mode"] == "planted"
    assert (report["reader"]["curve"], report["reader"]["seed"]) == ("u", 0)
    assert report["reader"]["plants"]["questions"] == NQ_QUESTIONS
    assert report["questions"] == NQ_QUESTIONS
    assert list(report["strategies"]) == list(STRATEGIES)
    assert len(rows) == NQ_QUESTIONS * len(STRATEGIES)
    for name in STRATEGIES:
        mine = [r for r in rows if r["strategy"] == name]
        assert not [r["error"] for r in mine if r["error"]]
        got = report["strategies"][name]
        assert got["accuracy"] == round(sum(r["correct"] for r in mine) / len(mine), 4)
        assert got["ci95"][0] <= got["accuracy"] <= got["ci95"][1]
        assert all(r["decision"] and r["decision"]["strategy"] == name for r in mine)
    assert report["corg_counterfactual_split"] is None  # NQ plants no counterfactual


def test_permuted_orders_beat_one_order(nq):
    report, _ = nq
    assert accuracy(report, "single") < accuracy(report, "permute_vote"), report["strategies"]


def test_a_vote_of_one_view_is_no_better_than_single(settings):
    # The control: permute_vote's gain comes from its K orders, not from the harness. With
    # K = 1 its one view is single's, so the claim above must fail.
    one = settings.model_copy(
        update={"ensemble": settings.ensemble.model_copy(update={"members": 1})}
    )
    report, _ = run_methods(
        one,
        load_cases(NQ, limit=NQ_QUESTIONS),
        ["single", "permute_vote"],
        dataset=NQ.name,
        planted=ReaderSettings(),
        embedder=HashEmbedder(),
        progress=lambda line: None,
    )
    assert accuracy(report, "permute_vote") == accuracy(report, "single"), report["strategies"]


def test_self_consistency_gains_nothing_where_errors_come_from_the_context(nq):
    report, _ = nq
    got = report["strategies"]
    assert accuracy(report, "self_consistency") <= accuracy(report, "single"), got
    assert got["self_consistency"]["llm_calls"] > got["single"]["llm_calls"]  # it did sample


def test_context_bagging_gains_over_single_and_self_consistency(nq):
    report, _ = nq
    assert accuracy(report, "cobag") > accuracy(report, "single"), report["strategies"]
    assert accuracy(report, "cobag") > accuracy(report, "self_consistency")


def test_citation_consistent_voting_is_at_least_majority_voting(nq):
    report, _ = nq
    assert accuracy(report, "ccv") >= accuracy(report, "permute_vote"), report["strategies"]


def test_moi_recovers_the_planted_position_curve_and_its_order_helps(nq):
    report, rows = nq
    assert report["moi_position_spearman"] >= 0.9, report["moi_position_spearman"]
    assert accuracy(report, "moi") > accuracy(report, "single"), report["strategies"]
    assert all(r["moi_position_weights"] for r in rows if r["strategy"] == "moi")


def test_corg_splits_counterfactuals_and_collapses_duplicates_with_few_calls(conflictqa):
    report, rows = conflictqa
    assert report["corg_counterfactual_split"] >= 0.9, report
    assert report["corg_duplicate_collapse"] >= 0.9, report
    assert report["corg_relation_calls"] < report["corg_pairs"], report
    assert all(r["decision"] and r["decision"]["source"] == "organize" for r in rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategies", "single,nope"], "unknown strategy 'nope'"),
        (["--reader", "oracle"], "unknown --reader 'oracle'"),
        (["--reader-seed", "3"], "need --reader planted"),
        (["--reader", "planted", "--reader-curve", "zigzag"], "unknown --reader-curve"),
        (["--offset", "100000", "--reader", "planted"], "no usable questions"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(quorum_home, args, message):
    proc = run_quorum(quorum_env(quorum_home), "eval", "methods", "--dataset", str(NQ), *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_file_of_neither_dataset_is_refused(quorum_home, tmp_path):
    other = tmp_path / "other.jsonl.gz"
    other.write_bytes(gzip.compress(b'{"query": "q", "docs": []}\n'))
    proc = run_quorum(
        quorum_env(quorum_home), "eval", "methods", "--dataset", str(other), "--reader", "planted"
    )
    assert proc.returncode == 2 and "neither NaturalQuestions-open" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
