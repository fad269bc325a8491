"""Issue 55, a self-verifying liar: a model that answers "no" against an abstract saying yes, and
judges its own answer supported, quoting that very sentence. Served over HTTP/1.1 keep-alive by
stub endpoints of this test's own, to `quorum ask`, over a corpus of this test's own text.

Alone, it is the only judge there is: its answer is labelled self-verified, never verified.
Beside another configured model, that model judges by default, and refuses the lie; a judge the
user set for the verify role keeps its endpoint when --model points the rest at the liar.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import quorum_env, run_quorum
from tests.support.stub_endpoint import serve_stub, spec

QUESTION = "Is aspirin effective in preventing colorectal adenomas?"
ASPIRIN = "910001"
FINDING = (
    "Daily low-dose aspirin was effective in preventing the recurrence of colorectal adenomas."
)
DOCS = [
    {
        "pmid": ASPIRIN,
        "title": "Low-dose aspirin and the recurrence of colorectal adenomas",
        "abstract": "We randomised 1,121 adults with a history of colorectal adenomas to aspirin "
        f"or placebo for three years. {FINDING} Serious bleeding was rare.",
    },
    {
        "pmid": "910002",
        "title": "Statins after myocardial infarction",
        "abstract": "Statins reduced mortality after myocardial infarction in 4,000 patients.",
    },
    {
        "pmid": "910003",
        "title": "Metformin and lactic acidosis in kidney disease",
        "abstract": "Lactic acidosis was rare among metformin users with moderate kidney disease.",
    },
    {
        "pmid": "910004",
        "title": "Vitamin D and fractures in older adults",
        "abstract": "Vitamin D alone did not reduce fractures in adults over 70 years of age.",
    },
]
"""This test's own text (MIT, as the project): no sentence is taken from PubMed."""


def answerer(word: str):
    """A model that answers `word` for the aspirin question and calls its answer supported."""
    ideal = {
        "no": "No. Daily low-dose aspirin was not effective in preventing colorectal adenomas.",
        "yes": f"Yes. {FINDING}",
    }[word]

    def reply(role: str, prompt: str):
        return {
            "query": {"query": "aspirin AND adenomas"},
            "organize": {"duplicates": []},
            "ensemble": {"answer": word, "pmids": [ASPIRIN]},
            "synthesize": {
                "exact_answer": word,
                "ideal_answer": ideal,
                "confidence": 0.95,
                "cited_pmids": [ASPIRIN],
                "rationale": f"PMID {ASPIRIN}.",
            },
            # It vouches for its own answer with a sentence that stands in the abstract.
            "verify": {"verdicts": [{"pmid": ASPIRIN, "quote": FINDING, "verdict": "supports"}]},
        }.get(role, "][{")

    return reply


def honest_judge(role: str, prompt: str):
    """A model that judges by the finding (and gives nothing usable when asked to answer)."""
    if role != "verify":
        return "][{"
    said = "supports" if "Exact answer: yes" in prompt else "contradicts"
    return {"verdicts": [{"pmid": ASPIRIN, "quote": FINDING, "verdict": said}]}


@pytest.fixture(scope="module")
def corpus_home(tmp_path_factory) -> Path:
    """A data directory whose index `judge` holds this test's four abstracts."""
    home = tmp_path_factory.mktemp("judge-home")
    source = home / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    proc = run_quorum(quorum_env(home), "index", str(source), "--index", "judge", "--no-embeddings")
    assert proc.returncode == 0, proc.stderr
    return home


def ask(home: Path, *flags: str, **env: str):
    settings = {
        "QUORUM_SEARCH__INDEX": "judge",
        "QUORUM_FALLBACK__ENABLED": "false",
        "QUORUM_ORGANIZE__STRATEGY": "dedupe",
        "QUORUM_ENSEMBLE__STRATEGY": "single",
        "QUORUM_MODELS__CACHE": "off",
    }
    args = ["ask", QUESTION, "--type", "yesno", *flags]
    return run_quorum(quorum_env(home) | settings | env, *args, timeout=600)


def test_a_liar_alone_is_labelled_self_verified_never_verified(corpus_home):
    with serve_stub("liar", answerer("no")) as liar:
        roles = {"QUORUM_MODELS__QUERY": json.dumps(spec(liar))}
        roles["QUORUM_MODELS__ENSEMBLE"] = json.dumps([spec(liar)])
        proc = ask(corpus_home, "--json", **roles)
        shown = ask(corpus_home, **roles)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["exact_answer"] == "no"  # nothing but the liar judged it
    assert result["support"]["verified"] == "self-verified"
    assert result["support"]["judge"] == "self"
    assert "verify" in liar.roles()
    assert shown.returncode == 0, shown.stderr
    assert "self-verified: judged only by the model that wrote the answer" in shown.stdout
    assert "models by role" not in proc.stderr  # one model: nothing to list
    # Served on kept-alive connections: one connection carried several requests.
    assert max(liar.connections) > 1


def test_another_configured_model_judges_by_default_and_refuses_the_lie(corpus_home):
    with serve_stub("liar", answerer("no")) as liar, serve_stub("judge", honest_judge) as judge:
        proc = ask(
            corpus_home,
            "--json",
            QUORUM_MODELS__QUERY=json.dumps(spec(liar)),
            QUORUM_MODELS__ENSEMBLE=json.dumps([spec(liar), spec(judge)]),  # verify: not set
        )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["insufficient"] is True and result["exact_answer"] is None
    assert "verifier" in result["insufficient_reason"]
    assert "contradicts" in result["insufficient_reason"]
    assert "verify" in judge.roles() and "verify" not in liar.roles()
    assert f"verify → {judge.base_url} (judge)" in proc.stderr  # said once, before the run
    assert proc.stderr.count("models by role") == 1


def test_a_judge_set_for_the_verify_role_keeps_its_endpoint_beside_model(corpus_home):
    with serve_stub("liar", answerer("no")) as liar, serve_stub("judge", honest_judge) as judge:
        proc = ask(
            corpus_home,
            "--json",
            "--model",
            f"{liar.base_url}#liar",
            QUORUM_MODELS__VERIFY=json.dumps(spec(judge)),
        )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["insufficient"] is True and "contradicts" in result["insufficient_reason"]
    assert "verify" in judge.roles() and "verify" not in liar.roles()
    assert "synthesize" in liar.roles()


def test_control_a_true_answer_judged_by_another_model_is_given_and_says_so(corpus_home):
    with serve_stub("truth", answerer("yes")) as truth, serve_stub("judge", honest_judge) as judge:
        proc = ask(
            corpus_home,
            "--json",
            QUORUM_MODELS__QUERY=json.dumps(spec(truth)),
            QUORUM_MODELS__ENSEMBLE=json.dumps([spec(truth), spec(judge)]),
        )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["exact_answer"] == "yes"
    assert result["support"]["verified"] == "supported"
    assert result["support"]["judge"] == "independent"
    assert "verify" in judge.roles()
