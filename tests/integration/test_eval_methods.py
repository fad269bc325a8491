"""`quorum eval methods` against the planted reader: the report, the controls, the wiring.

The planted reader (lab/simulate) answers by plants quorum wrote, so nothing here claims a
method helps: a gain under it is the simulator's assumptions read back. What it can show, and
these tests check, is that each method is wired (its decision reaches the answer, at the K and
m its settings name), that its controls run at the method's own K and m with only one knob
changed, and that the report's paired counts, p-values and intervals follow from its rows.
The samples are in tests/fixtures/eval_methods (README there: which records, licences).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest
from scipy.stats import binomtest

from lab.simulate.planted import Plants
from lab.simulate.reader import ReaderSettings
from lab.trials.controls import CCV_MEMBERS, CORG_BASELINES, MOI_PERMUTATIONS
from lab.trials.datasets import DISTRACTORS, GOLD_WITHIN, HARD, load_cases, normalize
from lab.trials.methods import run_methods, table
from tests.support.cli import quorum_env, run_quorum
from tests.support.fakes import HashEmbedder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval_methods"
NQ = FIXTURES / "nq_open_sample.jsonl.gz"
CONFLICTQA = FIXTURES / "conflictqa_sample.jsonl"
NQ_QUESTIONS = 15  # 10 runs each (5 methods, 5 controls): 2 minutes on 2 AVX2 cores
CONFLICTQA_QUESTIONS = 20
STRATEGIES = ("single", "permute_vote", "cobag", "ccv", "moi")
CONTROLS = {
    "cobag": {"no_shuffle", "uniform", "permute_vote"},
    "ccv": {"answer_count"},
    "moi": {"flat_weights"},
}
# K off the defaults, so a control that took the defaults instead of its method's K shows;
# CoBag's K unlike ensemble.members, so its permute_vote control is a run of its own.
COBAG_K, CCV_K = 3, 10
READER = ("--reader", "planted", "--reader-curve", "u", "--reader-seed", "0")
C_KEYS = {"accuracy", "ci95", "members", "contexts", "paired", "beats_control"}


def evaluate(
    home: Path, out: Path, dataset: Path, limit: int, *extra: str, env: dict | None = None
) -> tuple[dict, list]:
    """Run the command as a user would; return its report and its rows."""
    rows = out / f"{dataset.stem}.rows.jsonl"
    proc = run_quorum(
        quorum_env(home) | (env or {}),
        "eval",
        "methods",
        "--dataset",
        str(dataset),
        *READER,
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
    env = {
        "QUORUM_ENSEMBLE__COBAG__MEMBERS": str(COBAG_K),
        "QUORUM_ENSEMBLE__CCV__MEMBERS": str(CCV_K),
    }
    strategies = ",".join(STRATEGIES)
    return evaluate(quorum_home, out, NQ, NQ_QUESTIONS, "--strategies", strategies, env=env)


@pytest.fixture(scope="module")
def conflictqa(quorum_home, tmp_path_factory) -> tuple[dict, list]:
    out = tmp_path_factory.mktemp("eval-methods-conflictqa")
    return evaluate(quorum_home, out, CONFLICTQA, CONFLICTQA_QUESTIONS, "--strategies", "corg")


def by_run(rows: list) -> dict[str, dict[str, dict]]:
    """Return the rows by run label, then by case id."""
    runs: dict[str, dict[str, dict]] = {}
    for row in rows:
        runs.setdefault(row["strategy"], {})[row["id"]] = row
    return runs


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
    runs = by_run(rows)
    controls = {f"{m}/{c}" for m, names in CONTROLS.items() for c in names}
    assert set(runs) == set(STRATEGIES) | controls
    assert all(len(got) == NQ_QUESTIONS for got in runs.values())
    assert len(rows) == NQ_QUESTIONS * len(runs)
    for label, got in runs.items():
        assert not [r["error"] for r in got.values() if r["error"]], label
    for name in STRATEGIES:
        mine = list(runs[name].values())
        got = report["strategies"][name]
        assert got["accuracy"] == round(sum(r["correct"] for r in mine) / len(mine), 4)
        assert got["ci95"][0] <= got["accuracy"] <= got["ci95"][1]
        assert all(r["decision"] and r["decision"]["strategy"] == name for r in mine)
    assert report["corg_counterfactual_split"] is None  # NQ plants no counterfactual
    assert report["ablations"].keys() == {"cobag"}  # without --ablations: CoBag's, free


def test_every_run_reports_the_K_and_m_its_settings_name_and_the_graph_ran(nq, settings):
    report, rows = nq
    ensemble = settings.ensemble
    expected = {
        "single": (1, ensemble.contexts),
        "permute_vote": (ensemble.members, ensemble.contexts),
        "cobag": (COBAG_K, ensemble.cobag.contexts),
        "ccv": (CCV_K, ensemble.ccv.contexts),
        "moi": (1, ensemble.contexts),
    }
    for name, (k, m) in expected.items():
        got = report["strategies"][name]
        assert (got["members"], got["contexts"]) == (k, m), name
        for control, measured in report["controls"].get(name, {}).items():
            # A control runs at its method's K and m (CoBag's permute_vote too).
            assert (measured["members"], measured["contexts"]) == (k, m), (name, control)
    runs = by_run(rows)
    for label, got in runs.items():
        method = label.split("/")[0]
        k, m = expected[method]
        recorded = {(r["decision"]["members"], r["decision"]["contexts"]) for r in got.values()}
        assert recorded == {(k, m)}, label  # what the decision says it ran with
    assert {r["decision"]["strategy"] for r in runs["cobag/permute_vote"].values()} == {
        "permute_vote"
    }


def _check_controls(report: dict, rows: list, methods: dict[str, set[str]]) -> None:
    """Check the controls block's keys, and its numbers against the rows."""
    assert report["controls"].keys() == methods.keys()
    runs = by_run(rows)
    for method, names in methods.items():
        assert report["controls"][method].keys() == names
        for control, got in report["controls"][method].items():
            assert got.keys() == C_KEYS, (method, control)
            assert got["paired"].keys() == {"method_only", "control_only", "p", "diff_ci95"}
            mine, theirs = runs[method], runs[f"{method}/{control}"]
            assert mine.keys() == theirs.keys()  # the same questions, paired
            a = sum(mine[i]["correct"] and not theirs[i]["correct"] for i in mine)
            b = sum(theirs[i]["correct"] and not mine[i]["correct"] for i in mine)
            test = got["paired"]
            assert (test["method_only"], test["control_only"]) == (a, b), (method, control)
            p = binomtest(a, a + b, 0.5).pvalue if a + b else 1.0
            assert test["p"] == pytest.approx(p, abs=1e-6)
            n = len(mine)
            right = sum(r["correct"] for r in theirs.values())
            assert got["accuracy"] == round(right / n, 4)
            accuracy = report["strategies"][method]["accuracy"]
            assert accuracy - got["accuracy"] == pytest.approx((a - b) / n, abs=1e-3)
            low, high = test["diff_ci95"]
            assert -1 <= low <= (a - b) / n <= high <= 1
            assert got["beats_control"] == (low > 0)


def test_each_method_is_paired_with_its_controls_and_the_numbers_follow_from_the_rows(nq):
    _check_controls(*nq, CONTROLS)


def test_corg_is_paired_with_its_control_without_relations(conflictqa):
    report, rows = conflictqa
    _check_controls(report, rows, {"corg": {"no_relations"}})
    without = [r for r in rows if r["strategy"] == "corg/no_relations"]
    assert all(r["corg"]["relation_calls"] == 0 for r in without)  # the knob reached organize


def test_moi_recovers_the_planted_position_curve_and_its_control_fits_none(nq):
    report, rows = nq
    # Wiring: the fits recover the curve the reader plants, not noise. A fit's rho over 12
    # positions has sd ~0.3 by chance, so the mean of 15 has ~0.08; 0.5 is far above that.
    assert report["moi_position_spearman"] >= 0.5, report["moi_position_spearman"]
    runs = by_run(rows)
    assert all(r["moi_position_weights"] for r in runs["moi"].values())
    for row in runs["moi/flat_weights"].values():
        assert all(len(set(w)) == 1 for w in row["moi_position_weights"] or [])


def test_the_text_table_shows_each_methods_controls_beside_it(nq):
    report, _ = nq
    lines = table(report)
    at = {line.split()[0]: n for n, line in enumerate(lines) if line and not line[0].isspace()}
    for method, names in CONTROLS.items():
        got = report["controls"][method]
        for control in names:
            [line] = [x for x in lines if x.strip().startswith(f"{method} vs {control} ")]
            assert lines.index(line) > at[method]
            test = got[control]["paired"]
            assert f"K={got[control]['members']} m={got[control]['contexts']}" in line
            assert f"a/b {test['method_only']}/{test['control_only']}" in line
            assert "p=" in line
            beaten = f"{method} does not beat {control}" in "\n".join(lines)
            assert beaten == (not got[control]["beats_control"])


def test_a_vote_of_one_view_answers_as_single(settings):
    # Wiring, not a gain: permute_vote with K = 1 shows single's one view, so every answer
    # is single's; a harness that scored anything but the graph's answer would differ.
    one = settings.model_copy(
        update={"ensemble": settings.ensemble.model_copy(update={"members": 1})}
    )
    _, rows = run_methods(
        one,
        load_cases(NQ, limit=20),
        ["single", "permute_vote"],
        dataset=NQ.name,
        planted=ReaderSettings(curve="u"),
        embedder=HashEmbedder(),
        progress=lambda line: None,
    )
    single = [r.answer for r in rows["single"]]
    assert [r.answer for r in rows["permute_vote"]] == single


def test_corg_splits_counterfactuals_answers_conflicts_plurally_and_one_side_surely(conflictqa):
    report, rows = conflictqa
    assert report["corg_counterfactual_split"] >= 0.9, report
    assert report["corg_duplicate_collapse"] >= 0.9, report
    assert report["corg_relation_calls"] < report["corg_pairs"], report
    runs = by_run(rows)
    assert all(r["decision"]["source"] == "organize" for r in runs["corg"].values())
    conflict = [r["corg"]["plural_or_below_gate"] for r in runs["corg"].values()]
    assert report["corg_plural_on_conflict"] == round(sum(conflict) / len(conflict), 4)
    alone = list(runs["corg/without_counterfactual"].values())
    assert len(alone) == CONFLICTQA_QUESTIONS  # every sample case plants a counterfactual
    confident = [r["corg"]["confident"] for r in alone]
    assert report["corg_confident_without_conflict"] == round(sum(confident) / len(alone), 4)
    assert not any(r["corg"]["conflict"] for r in alone)  # one side left


def test_ablations_report_the_papers_tables(settings, quorum_home, tmp_path):
    cases = load_cases(NQ, limit=2)
    report, rows = run_methods(
        settings,
        cases,
        ["cobag", "ccv", "moi"],
        dataset=NQ.name,
        planted=ReaderSettings(curve="u"),
        ablations=True,
        embedder=HashEmbedder(),
        progress=lambda line: None,
    )
    ablations = report["ablations"]
    assert ablations["cobag"].keys() == {"cobag", "no_shuffle", "uniform"}
    assert ablations["cobag"]["uniform"] == report["controls"]["cobag"]["uniform"]
    assert list(ablations["ccv"]) == [str(k) for k in CCV_MEMBERS]
    for k in CCV_MEMBERS:
        row = ablations["ccv"][str(k)]
        assert row["citation"]["members"] == row["answer_count"]["members"] == k
        assert row["answer_count"].keys() == C_KEYS
    assert list(ablations["moi"]) == list(MOI_PERMUTATIONS)
    own = [dataclasses.replace(r, strategy="moi/permutations/random") for r in rows["moi"]]
    assert rows["moi/permutations/random"] == own  # the method's own scheme is its run
    report, _ = evaluate(
        quorum_home, tmp_path, CONFLICTQA, 2, "--strategies", "corg", "--ablations"
    )
    corg = report["ablations"]["corg"]
    assert corg["measure"] == "answer_recall" and corg["d_f1"] is None
    assert "not available offline" in corg["note"]
    assert list(corg["strategies"]) == ["corg", *CORG_BASELINES]
    for name, got in corg["strategies"].items():
        assert 0 <= got["answer_recall"] <= 1, name
    assert any(line.startswith("ablation corg") for line in table(report))


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
