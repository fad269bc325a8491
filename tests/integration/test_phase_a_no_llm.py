"""`quorum bioasq run --phase A --no-llm`: a phase-A batch no model takes part in, then scored."""

import json
import subprocess
from pathlib import Path

from tests.support.cli import quorum_env, run_quorum
from tests.support.data import GOLDEN

# Every role points at a port nothing listens on: one model call would fail the question.
DEAD = json.dumps({"provider": "openai", "model": "none", "base_url": "http://127.0.0.1:9/v1"})


def quorum(home: Path, *args: str, **settings: str) -> subprocess.CompletedProcess:
    env = quorum_env(home) | {
        "QUORUM_MODELS__QUERY": DEAD,
        "QUORUM_MODELS__ENSEMBLE": f"[{DEAD}]",
        "QUORUM_FALLBACK__ENABLED": "false",
        **settings,
    }
    return run_quorum(env, *args, timeout=300)


def test_phase_a_without_a_model_answers_and_is_scored(tmp_path):
    out = tmp_path / "a.json"
    args = ["bioasq", "run", "--input", str(GOLDEN), "--output", str(out), "--phase", "A"]
    proc = quorum(tmp_path, *args, "--limit", "2", "--no-llm", QUORUM_SEARCH__DENSE_CANDIDATES="50")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 answered" in proc.stderr and "0 LLM calls" in proc.stderr
    questions = json.loads(out.read_text())["questions"]
    assert len(questions) == 2
    assert all(q["documents"] and q["snippets"] for q in questions)
    assert quorum(tmp_path, "bioasq", "validate", str(out), "--phase", "A").returncode == 0
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
    )
    report = json.loads(scored.stdout)
    assert {"documents_map", "snippets_f1"} <= set(report) and report["snippets_f1"] is not None


def test_no_llm_is_refused_outside_phase_a(tmp_path):
    out = tmp_path / "b.json"
    for phase in ("A+", "B"):
        args = ["bioasq", "run", "--input", str(GOLDEN), "--output", str(out), "--phase", phase]
        proc = quorum(tmp_path, *args, "--no-llm")
        assert proc.returncode == 2 and "--no-llm runs phase A only" in proc.stderr
        assert "Traceback" not in proc.stderr and not out.exists()
