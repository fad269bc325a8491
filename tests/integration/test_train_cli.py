"""`quorum train` end to end: a tiny model trained from the command line, and wrong input refused."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.data import CORPUS, GOLDEN
from tests.support.tiny_models import write_tiny_bert

QUORUM = str(Path(sys.executable).parent / "quorum")


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    data = json.loads(GOLDEN.read_text())
    path = tmp_path_factory.mktemp("golden") / "train_golden.json"
    path.write_text(json.dumps({"questions": data["questions"][:8]}))
    return path


def train(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    # One thread: two threads' barriers cost ten times more on a busy 2-core runner.
    env |= {"QUORUM_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [QUORUM, "train", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_tiny_retriever_trained_from_the_command_line(tmp_path, golden):
    from sentence_transformers import SentenceTransformer

    base = write_tiny_bert(tmp_path / "bert")
    out = tmp_path / "models" / "retriever"
    done = train(
        tmp_path,
        "retriever",
        "--questions",
        str(golden),
        "--corpus",
        str(CORPUS),
        "--output",
        str(out),
        "--base",
        str(base),
        "--batch-size",
        "4",
        "--device",
        "cpu",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"QUORUM_EMBEDDINGS__PATH={out.resolve()}"
    assert any(line.startswith("QUORUM_RERANK__ALPHA=") for line in lines)
    assert "dev trained" in done.stderr and "%|" in done.stderr  # figures and a progress bar
    assert SentenceTransformer(str(out), device="cpu").encode(["cell"]).shape == (1, 32)
    card = (out / "README.md").read_text()
    assert "## Dev figures" in card and "train_golden.json" in card
    # The dev split as a golden file other commands read (quorum eval snippets --questions).
    from infra.bioasq.formats import load_questions

    record = json.loads((out / "quorum-training.json").read_text())
    dev = load_questions(out / "dev_questions.json")
    assert len(dev) == record["data"]["dev_questions"] >= 1
    given = {q["id"]: q for q in json.loads(golden.read_text())["questions"]}
    assert all(q.id in given and q.body == given[q.id]["body"] and q.documents for q in dev)


@pytest.mark.parametrize(("level", "positives"), [("document", 1), ("sentence", 4)])
def test_a_tiny_reranker_records_the_positives_it_trained_on(tmp_path, golden, level, positives):
    out = tmp_path / "models" / level
    args = ["--questions", str(golden), "--corpus", str(CORPUS), "--output", str(out)]
    args += ["--base", str(write_tiny_bert(tmp_path / "bert")), "--batch-size", "4"]
    done = train(tmp_path, "reranker", *args, "--level", level, "--device", "cpu")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "quorum-training.json").read_text())
    assert record["settings"]["max_positives"] == positives
    assert f"- max positives: {positives}" in (out / "README.md").read_text()


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "no such file"),
        ("no-documents", "no question lists gold 'documents'"),
        ("taken", "exists and is not empty"),
    ],
)
def test_wrong_input_is_one_line_and_exit_2_with_nothing_overwritten(
    tmp_path, golden, case, message
):
    questions, out = golden, tmp_path / "out"
    if case == "missing":
        questions = tmp_path / "nowhere.json"
    elif case == "no-documents":
        data = json.loads(golden.read_text())
        questions = tmp_path / "phase_b.json"
        questions.write_text(
            json.dumps({"questions": [{**q, "documents": []} for q in data["questions"]]})
        )
    else:
        out.mkdir()
        (out / "model.safetensors").write_text("someone's model")
    done = train(
        tmp_path,
        "reranker",
        "--questions",
        str(questions),
        "--corpus",
        str(CORPUS),
        "--output",
        str(out),
        "--device",
        "cpu",
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert "Traceback" not in done.stderr
    if case == "taken":
        assert [p.name for p in out.iterdir()] == ["model.safetensors"]
        assert (out / "model.safetensors").read_text() == "someone's model"
    else:
        assert not out.exists()


def test_a_terminated_training_leaves_no_scratch_directory(tmp_path, golden):
    base = write_tiny_bert(tmp_path / "bert")
    models = tmp_path / "models"
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    env |= {"QUORUM_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    args = ["retriever", "--questions", str(golden), "--corpus", str(CORPUS), "--base", str(base)]
    args += ["--output", str(models / "retriever"), "--epochs", "200", "--batch-size", "4"]
    proc = subprocess.Popen(
        [QUORUM, "train", *args, "--device", "cpu"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not list(models.glob(".retriever.*/checkpoints")):
        time.sleep(0.2)  # the trainer has made its scratch directory: training is under way
    assert list(models.glob(".retriever.*")), "training never started"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "terminated" in stderr
    assert list(models.iterdir()) == []  # no hidden scratch, no half-written model


def test_bench_train_times_a_run_and_keeps_nothing_unless_asked(tmp_path, golden):
    base = write_tiny_bert(tmp_path / "bert")
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env |= {"QUORUM_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1", "TMPDIR": str(scratch)}
    args = ["--questions", str(golden), "--corpus", str(CORPUS), "--base", str(base)]
    done = subprocess.run(
        [QUORUM, "bench", "train", "--kind", "retriever", *args, "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["device"] == "cpu" and report["epochs"] == 1 and report["output"] is None
    assert report["steps"] == -(-report["training_rows"] // report["batch_size"]) >= 1
    assert 0 < report["train_seconds"] <= report["total_seconds"]
    assert report["target_s"] == 2700 and report["met"] is (report["total_seconds"] <= 2700)
    assert report["peak_rss_mib"] > 0 and len(report["load_before"]) == 3
    assert list(scratch.iterdir()) == []  # the model was trained, timed and removed


def test_bench_train_refuses_an_unknown_kind_in_one_line(tmp_path, golden):
    done = subprocess.run(
        [QUORUM, "bench", "train", "--kind", "ranker", "--questions", str(golden)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "unknown --kind 'ranker'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
