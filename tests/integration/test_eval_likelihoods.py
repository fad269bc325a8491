"""`quorum eval likelihoods` with the real local model (SmolLM2-135M) on two NQ questions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lab.trials.likelihood_fits import MODELS
from tests.support.cli import quorum_env, run_quorum

NQ = Path(__file__).resolve().parents[1] / "fixtures" / "eval_methods" / "nq_open_sample.jsonl.gz"
# The default local model shown 200 characters of each passage (the least allowed) instead of
# 500: the same calls on under half the tokens, so the test stays under a minute on 2 cores.
SHORT = json.dumps([{"provider": "local", "context_chars": 200}])


@pytest.mark.slow
def test_fits_and_curve_from_the_local_models_likelihoods(quorum_home):
    proc = run_quorum(
        quorum_env(quorum_home) | {"QUORUM_MODELS__ENSEMBLE": SHORT},
        "eval",
        "likelihoods",
        "--dataset",
        str(NQ),
        "--limit",
        "2",
        "--passages",
        "4",
        "--orders-per-question",
        "15",
        "--observation",
        "question",
        "--json",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.strip().splitlines()) == 1  # exactly one JSON object
    result = json.loads(proc.stdout)
    assert "135M" in result["scope"] and "answer quality" in result["scope"]
    (report,) = result["models"]
    assert report["model"] == "smollm2-135m-instruct"
    assert (report["questions"], report["passages"]) == (2, 4)
    assert (report["fitting_orders"], report["held_out_orders"]) == (12, 3)
    assert report["observation"] == "question"
    assert report["likelihood_calls"] == 2 * (15 + 4)
    for name in MODELS:
        assert math.isfinite(report["fits"][name]["r2_pooled"])
    assert set(report["best_fit"].values()) <= set(MODELS)
    (first,) = report["per_question"][:1]
    assert len(first["scores"]["fitting"]) == 12 and len(first["orders"]["held_out"]) == 3
    weights = report["moi_mean_weights"]
    assert len(weights) == 4 and abs(sum(weights) - 1) < 1e-3 and min(weights) >= 0
    curve = report["gold_position_curve"]["mean"]
    # Real log-probabilities of a few-token answer: negative, finite, and not all alike.
    assert len(curve) == 4 and all(-200 < v < 0 for v in curve) and len(set(curve)) > 1
    progress = [line for line in proc.stderr.splitlines() if line.startswith("question ")]
    assert len(progress) == 2


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--passages", "3"), "--passages 3"),
        (("--orders-per-question", "16"), "--orders-per-question 16"),
        (("--observation", "both"), "unknown --observation"),
        (("--limit", "0"), "--limit 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    proc = run_quorum(
        quorum_env(tmp_path), "eval", "likelihoods", "--dataset", str(NQ), *args, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr


def test_a_dataset_that_is_not_there_is_one_line(tmp_path):
    missing = tmp_path / "nq.jsonl.gz"
    proc = run_quorum(quorum_env(tmp_path), "eval", "likelihoods", "--dataset", str(missing))
    assert proc.returncode == 2 and proc.stderr == f"quorum: error: {missing}: no such file\n"
