"""Commands that write a user-named path refuse a special file before any model loads."""

import os
import stat
from pathlib import Path

from tests.support.cli import quorum_env, run_quorum

TESTSET = Path(__file__).resolve().parents[1] / "fixtures" / "bioasq_submissions" / "testset.json"


def test_bioasq_run_refuses_a_fifo_output_in_one_line(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    proc = run_quorum(
        quorum_env(tmp_path),
        "bioasq",
        "run",
        "--input",
        str(TESTSET),
        "--output",
        str(fifo),
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "is a FIFO, not a file" in proc.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert not (tmp_path / "out.json.journal.jsonl").exists()  # refused before any write


def test_bioasq_report_refuses_an_output_dir_that_is_a_file(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("keep me")
    gold = Path(__file__).resolve().parents[1] / "fixtures" / "bioasq_eval" / "phase_b_gold.json"
    proc = run_quorum(
        quorum_env(tmp_path),
        "bioasq",
        "report",
        str(gold),
        "--gold",
        str(gold),
        "--output-dir",
        str(taken),
        timeout=120,
    )
    assert proc.returncode == 2 and "is not a directory" in proc.stderr, proc.stderr
    assert taken.read_text() == "keep me"


def test_trace_export_refuses_a_fifo_before_reading_any_run(tmp_path):
    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)
    proc = run_quorum(
        quorum_env(tmp_path), "trace", "export", "any-thread", "--html", str(fifo), timeout=120
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--html" in proc.stderr and "is a FIFO, not a file" in proc.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
