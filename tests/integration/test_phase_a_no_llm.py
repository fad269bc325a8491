"""`quorum bioasq run --phase A --no-llm`: a phase-A batch no model takes part in, then scored."""

import json

from tests.support.cli import quorum
from tests.support.data import GOLDEN

# Every role points at a port nothing listens on: one model call would fail the question.
DEAD = json.dumps({"provider": "openai", "model": "none", "base_url": "http://127.0.0.1:9/v1"})
NO_MODEL = {
    "QUORUM_MODELS__QUERY": DEAD,
    "QUORUM_MODELS__ENSEMBLE": f"[{DEAD}]",
    "QUORUM_FALLBACK__ENABLED": "false",
}


def test_phase_a_without_a_model_answers_and_is_scored(tmp_path):
    out = tmp_path / "a.json"
    args = ["bioasq", "run", "--input", str(GOLDEN), "--output", str(out), "--phase", "A"]
    proc = quorum(
        tmp_path,
        *args,
        "--limit",
        "2",
        "--no-llm",
        QUORUM_SEARCH__DENSE_CANDIDATES="50",
        **NO_MODEL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 answered" in proc.stderr and "0 LLM calls" in proc.stderr
    questions = json.loads(out.read_text())["questions"]
    assert len(questions) == 2
    assert all(q["documents"] and q["snippets"] for q in questions)
    assert (
        quorum(tmp_path, "bioasq", "validate", str(out), "--phase", "A", **NO_MODEL).returncode == 0
    )
    scored = quorum(
        tmp_path,
        "bioasq",
        "eval",
        "--gold",
        str(GOLDEN),
        "--submission",
        str(out),
        "--phase",
        "A",
        "--json",
        **NO_MODEL,
    )
    report = json.loads(scored.stdout)
    assert {"documents_map", "snippets_f1"} <= set(report) and report["snippets_f1"] is not None


def test_no_llm_is_refused_outside_phase_a(tmp_path):
    out = tmp_path / "b.json"
    for phase in ("A+", "B"):
        args = ["bioasq", "run", "--input", str(GOLDEN), "--output", str(out), "--phase", phase]
        proc = quorum(tmp_path, *args, "--no-llm", **NO_MODEL)
        assert proc.returncode == 2 and "--no-llm runs phase A only" in proc.stderr
        assert "Traceback" not in proc.stderr and not out.exists()


def test_eval_snippets_scores_the_grid_as_bioasq_eval_scores_a_run(tmp_path):
    """The sweep's row for the settings' own values is the F-measure `bioasq eval` gives the run."""
    out = tmp_path / "a.json"
    args = ["bioasq", "run", "--input", str(GOLDEN), "--output", str(out), "--phase", "A"]
    assert quorum(tmp_path, *args, "--limit", "3", "--no-llm", **NO_MODEL).returncode == 0
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps({"questions": json.loads(GOLDEN.read_text())["questions"][:3]}))
    evaluated = quorum(
        tmp_path,
        "bioasq",
        "eval",
        "--gold",
        str(gold),
        "--submission",
        str(out),
        "--phase",
        "A",
        "--json",
        **NO_MODEL,
    )
    run_f1 = json.loads(evaluated.stdout)["snippets_f1"]
    grid = ["--documents", "1,5", "--per-document", "1,5", "--min-score", "none,0.3"]
    proc = quorum(
        tmp_path, "eval", "snippets", "--questions", str(gold), *grid, "--json", **NO_MODEL
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["questions"] == 3 and report["scorer"] == "cosine"
    assert 0 <= report["gold_offsets_in_index"] <= 1 and 0 <= report["ceiling_f1"] <= 1
    rows = report["rows"]
    assert len(rows) == 8 and report["best"] == rows[0]
    assert [r["snippets_f1"] for r in rows] == sorted(
        (r["snippets_f1"] for r in rows), reverse=True
    )
    defaults = next(
        r for r in rows if (r["documents"], r["per_document"], r["min_score"]) == (5, 5, None)
    )
    assert defaults["limit"] == 10 and defaults["snippets_f1"] == round(run_f1, 4)
    assert all(0 <= r["snippets_f1_at_text"] <= 1 for r in rows)
    floored = next(
        r for r in rows if (r["documents"], r["per_document"], r["min_score"]) == (5, 5, 0.3)
    )
    assert 1 <= floored["snippets_per_question"] <= defaults["snippets_per_question"]
    one_doc = [r for r in rows if r["documents"] == 1 and r["per_document"] == 1]
    assert all(r["snippets_per_question"] == 1 for r in one_doc)


def test_eval_snippets_refuses_a_bad_grid_in_one_line(tmp_path):
    proc = quorum(
        tmp_path, "eval", "snippets", "--questions", str(GOLDEN), "--documents", "3,x", **NO_MODEL
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--documents: 'x' is not an integer" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bioasq_run_searches_the_index_it_is_given(tmp_path):
    corpus = tmp_path / "mine.jsonl"
    docs = [
        {"pmid": str(900001 + i), "title": f"Losartan study {i}", "abstract": text}
        for i, text in enumerate(
            [  # the first golden question asks about losartan and brain atrophy
                "Losartan did not reduce brain atrophy in mild Alzheimer's disease.",
                "Brain atrophy was measured by MRI in patients given losartan.",
                "Angiotensin receptor blockers and Alzheimer's disease progression.",
            ]
        )
    ]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    made = quorum(tmp_path, "index", str(corpus), "--index", "mine", **NO_MODEL)
    assert made.returncode == 0, made.stderr[-2000:]
    out = tmp_path / "a.json"
    args = ["bioasq", "run", "--input", str(GOLDEN), "--output", str(out), "--phase", "A"]
    proc = quorum(tmp_path, *args, "--limit", "1", "--no-llm", "--index", "mine", **NO_MODEL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (question,) = json.loads(out.read_text())["questions"]
    found = {url.rsplit("/", 1)[1] for url in question["documents"]}
    assert found and found <= {d["pmid"] for d in docs}  # not the demo corpus
    missing = quorum(
        tmp_path, *args, "--no-llm", "--index", "nosuch", "--backend", "embedded", **NO_MODEL
    )
    assert missing.returncode in (1, 2) and "nosuch" in missing.stderr.strip().splitlines()[-1]
    assert "Traceback" not in missing.stderr
