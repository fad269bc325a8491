"""`quorum bioasq validate` and `quorum bioasq run` from the command line."""

import json
from pathlib import Path

import pytest

from graphs.bioasq.journal import journal_path
from graphs.describe import DEMO_NOTICE
from infra.bioasq.validate import validate_submission
from tests.support.cli import quorum, run_quorum, simulated_env
from tests.support.data import GOLDEN

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bioasq_submissions"


def test_validate_prints_one_line_per_problem_and_exits_1(tmp_path):
    bad = tmp_path / "bad.json"
    submission = json.loads((FIXTURES / "valid.json").read_text())
    submission["questions"][0]["documents"] = ["31000001", "https://www.ncbi.nlm.nih.gov/pubmed/2"]
    bad.write_text(json.dumps(submission))
    proc = quorum(
        tmp_path,
        "bioasq",
        "validate",
        str(bad),
        "--input",
        str(FIXTURES / "testset.json"),
        "--phase",
        "B",
        "--no-texts",
    )
    assert proc.returncode == 1
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all(
        line.startswith(f"{bad}: questions[0].documents[") for line in lines
    )
    assert "2 problem(s)" in proc.stderr and "Traceback" not in proc.stderr


def test_validate_accepts_a_golden_file(tmp_path):
    proc = quorum(tmp_path, "bioasq", "validate", str(GOLDEN))
    assert proc.returncode == 0 and proc.stdout == "" and "valid" in proc.stderr


def test_validate_warns_on_junk_fails_it_with_strict_and_passes_a_clean_submission(tmp_path):
    testset = ("--input", str(FIXTURES / "testset.json"), "--phase", "A+", "--no-texts")
    junk = tmp_path / "junk.json"
    submission = json.loads((FIXTURES / "valid.json").read_text())
    submission["questions"][2]["ideal_answer"] = "][{"
    submission["questions"][1]["exact_answer"] = []
    junk.write_text(json.dumps(submission))
    proc = quorum(tmp_path, "bioasq", "validate", str(junk), *testset)
    warned = [
        f"{junk}: warning: questions[1] (id 6415a2c1690f196b51000002): the factoid exact answer "
        "is empty",
        f"{junk}: warning: questions[2] (id 6415a2c1690f196b51000003): the ideal answer '][{{' "
        "is not a sentence (0 word(s))",
    ]
    # BioASQ takes the file: the content is listed and counted, and the exit is 0.
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == warned
    assert "with 2 content warning(s)" in proc.stderr
    strict = quorum(tmp_path, "bioasq", "validate", str(junk), *testset, "--strict")
    assert strict.returncode == 1 and strict.stdout.splitlines() == warned
    assert "0 problem(s), 2 warning(s) (--strict: warnings fail)" in strict.stderr
    submission["questions"][2]["ideal_answer"] = "Insufficient evidence: no model could answer."
    submission["questions"][1]["ideal_answer"] = "Insufficient evidence: no model could answer."
    honest = tmp_path / "honest.json"
    honest.write_text(json.dumps(submission))
    for path in (honest, FIXTURES / "valid.json"):
        proc = quorum(tmp_path, "bioasq", "validate", str(path), *testset, "--strict")
        assert proc.returncode == 0 and proc.stdout == "", proc.stdout
        assert "valid" in proc.stderr


def test_validate_passes_gold_whose_ideal_answers_repeat_themselves_with_warnings(tmp_path):
    repeats = FIXTURES.parent / "bioasq_golden" / "golden_repeats.json"
    proc = quorum(tmp_path, "bioasq", "validate", str(repeats), "--no-texts")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and all(": warning: questions[" in line for line in lines)
    assert all("repeats itself" in line for line in lines)
    assert "with 3 content warning(s)" in proc.stderr
    strict = quorum(tmp_path, "bioasq", "validate", str(repeats), "--no-texts", "--strict")
    assert strict.returncode == 1 and strict.stdout.splitlines() == lines


def test_run_with_a_model_that_replies_junk_journals_failed_and_guesses_the_yesno(
    tmp_path, junk_endpoint
):
    testset = tmp_path / "t.json"
    body = "Do mitochondria play a role in lace plant programmed cell death?"
    testset.write_text(json.dumps({"questions": [{"id": "q1", "body": body, "type": "yesno"}]}))
    out = tmp_path / "run" / "submission.json"
    args = ["bioasq", "run", "--input", str(testset), "--output", str(out), "--phase", "A+"]
    env = simulated_env(junk_endpoint.base_url, tmp_path / "home", QUORUM_MODELS__CACHE="off")
    proc = run_quorum(env, *args, timeout=600)
    assert proc.returncode == 1, proc.stderr  # a model failure: retried by the next run
    assert "0 answered, 0 from the journal, 0 insufficient, 1 failed, 1 yes/no guessed" in (
        proc.stderr
    )
    assert "failed q1: no model could answer this question from the evidence found: " in (
        proc.stderr
    )
    assert f"ensemble: {junk_endpoint.base_url} returned '][{{'" in proc.stderr
    records = [json.loads(line) for line in journal_path(out).read_text().splitlines()[1:]]
    assert [r["status"] for r in records] == ["failed"]
    assert records[0]["guessed"] is True and records[0]["attempt"] == 2  # tried twice
    # Another model answered, not the demo: neither the notice nor the journal names it.
    assert "demo model" not in proc.stderr and "demo_model" not in records[0]
    entry = records[0]["entry"]
    assert entry["exact_answer"] == "yes"  # bioasq.unanswered_yesno, journalled as a guess
    assert entry["ideal_answer"].startswith("Insufficient evidence: no model could answer")
    submission = json.loads(out.read_text())
    assert submission["questions"] == [entry]
    assert validate_submission(submission, phase="A+") == []


def test_bioasq_bad_input_is_one_line_and_exit_2(tmp_path):
    for args, message in (
        (["validate", "nope.json"], "nope.json: no such file"),
        (["validate", str(FIXTURES / "valid.json"), "--phase", "C"], "unknown --phase 'C'"),
        (["run", "--input", "nope.json", "--output", "o.json"], "nope.json: no such file"),
        (
            [
                "run",
                "--input",
                str(FIXTURES / "not_json.json"),
                "--output",
                str(tmp_path / "o.json"),
            ],
            "not JSON",
        ),
    ):
        proc = quorum(tmp_path, "bioasq", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and message in proc.stderr


def test_eval_json_prints_the_official_keys(tmp_path):
    golden = str(GOLDEN)
    proc = quorum(tmp_path, "bioasq", "eval", "--gold", golden, "--submission", golden, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    for key in (
        "yesno_accuracy",
        "yesno_macro_f1",
        "factoid_strict_accuracy",
        "factoid_lenient_accuracy",
        "factoid_mrr",
        "list_precision",
        "list_recall",
        "list_f1",
    ):
        assert report[key] == 1.0
    proc = quorum(
        tmp_path,
        "bioasq",
        "eval",
        "--gold",
        golden,
        "--submission",
        golden,
        "--phase",
        "A",
        "--json",
    )
    report = json.loads(proc.stdout)
    assert {"documents_map", "documents_recall", "snippets_map", "snippets_recall"} <= set(report)
    assert report["documents_recall"] == 1.0 == report["snippets_recall"]


def test_eval_refuses_a_submission_of_another_round_and_notes_a_partial_one(tmp_path):
    gold = json.loads(GOLDEN.read_text(encoding="utf-8"))
    other = {"questions": [{**q, "id": f"other-{q['id']}"} for q in gold["questions"]]}
    part = {"questions": gold["questions"][:3] + other["questions"][:1]}
    procs = {}
    for name, submission in (("other", other), ("part", part)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(submission), encoding="utf-8")
        args = ("bioasq", "eval", "--gold", str(GOLDEN), "--submission", str(path), "--json")
        procs[name] = quorum(tmp_path, *args)
    refused = procs["other"]
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and not refused.stdout
    assert f"answers none of the {len(gold['questions'])} questions" in refused.stderr
    noted = procs["part"]
    assert noted.returncode == 0, noted.stderr
    assert json.loads(noted.stdout)["questions"] == 3  # stdout stays one JSON object
    assert f"note: 3 of the {len(gold['questions'])} gold questions scored" in noted.stderr
    assert "submitted but not in the golden file: 1" in noted.stderr


def test_eval_phase_a_plus_scores_documents_and_answers(tmp_path):
    gold = str(
        Path(__file__).resolve().parents[1] / "fixtures" / "bioasq_eval" / "phase_b_gold.json"
    )
    reports = {}
    for phase in ("A", "B", "A+"):
        proc = quorum(
            tmp_path,
            "bioasq",
            "eval",
            "--gold",
            gold,
            "--submission",
            gold,
            "--phase",
            phase,
            "--json",
        )
        assert proc.returncode == 0, proc.stderr
        reports[phase] = json.loads(proc.stdout)
    assert reports["A+"] == {**reports["A"], **reports["B"]}
    assert "documents_map" in reports["A+"] and "yesno_accuracy" in reports["A+"]


@pytest.mark.slow
def test_a_run_answered_by_the_demo_model_says_so_on_stderr_and_in_its_journal(tmp_path):
    """Issue 48: demo output is never submitted unawares — the notice before the batch, and
    `demo_model` on every journalled question (the notice's link names a section that exists)."""
    testset = tmp_path / "t.json"
    snippet = (
        "Mitochondrial dynamics change early during programmed cell death in lace plant leaves."
    )
    pubmed = "http://www.ncbi.nlm.nih.gov/pubmed/101"
    question = {
        "id": "q1",
        "body": "Do mitochondria change during lace plant programmed cell death?",
        "type": "yesno",
        "documents": [pubmed],
        "snippets": [
            {
                "document": pubmed,
                "text": snippet,
                "beginSection": "abstract",
                "endSection": "abstract",
                "offsetInBeginSection": 0,
                "offsetInEndSection": len(snippet),
            }
        ],
    }
    testset.write_text(json.dumps({"questions": [question]}))
    out = tmp_path / "run" / "submission.json"
    args = ["bioasq", "run", "--input", str(testset), "--output", str(out), "--phase", "B"]
    proc = quorum(tmp_path / "home", *args, QUORUM_ENSEMBLE__STRATEGY="single")
    assert "Traceback" not in proc.stderr
    notice = proc.stderr.index("SmolLM2-135M demo model")
    # Said before the batch's first question ends (its progress line; the status line comes
    # only after 30 s off a terminal, and the demo now answers one phase-B question sooner).
    assert notice < proc.stderr.index("[1/1] q1")
    records = [json.loads(line) for line in journal_path(out).read_text().splitlines()[1:]]
    assert [r.get("demo_model") for r in records] == [True]
    section = DEMO_NOTICE.rsplit("'", 2)[1]
    doc = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert f"## {section}\n" in doc.read_text(encoding="utf-8")
