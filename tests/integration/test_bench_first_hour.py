"""`quorum bench first-hour`: the report's shape, and a command that misses counts as failed.

No figure is asserted: a target met or missed on a shared machine says nothing about the code.
"""

import json
import sys

from lab.bench.first_hour import CASES, TARGETS_S, bench_first_hour
from tests.support.cli import quorum_env, run_quorum

CASE_KEYS = {"name", "command", "seconds", "cpu_s", "target_s", "passed", "why", "help_ratio"}


def test_the_cheap_cases_print_one_json_object_with_load_and_each_verdict(tmp_path):
    done = run_quorum(
        quorum_env(tmp_path), "bench", "first-hour", "--only", "trace_list,missing_index", "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [c["name"] for c in report["cases"]] == ["trace_list", "missing_index"]
    for case in report["cases"]:
        assert set(case) == CASE_KEYS
        assert case["target_s"] == TARGETS_S[case["name"]] and case["seconds"] > 0
        # Each did what it should (a list; one line naming the index, exit 2): only its time
        # may fail it here.
        assert case["why"] is None or "over the target" in case["why"], case["why"]
        assert case["passed"] == (case["why"] is None)
    assert report["passed"] == all(c["passed"] for c in report["cases"])
    assert len(report["loadavg"]) == 3 and report["cpus"] >= 1
    # Whether imports read compiled bytecode, the set-up's largest cost, is part of the figures.
    assert set(report["bytecode"]) == {"installed_compiled", "dont_write_bytecode"}
    assert all(isinstance(v, bool) for v in report["bytecode"].values())
    assert "first-hour: trace_list" in done.stderr  # progress goes to stderr
    # `quorum --help`'s time is the yardstick: each figure also as a multiple of it.
    assert report["help_s"] > 0 and "first-hour: quorum --help: " in done.stderr
    for case in report["cases"]:
        assert case["help_ratio"] == round(case["seconds"] / report["help_s"], 1)


def test_a_missed_target_and_a_wrong_outcome_are_reported_as_failed():
    # A quorum that exits 0 at once whatever it is asked: no refusal, no submission.
    fake = [sys.executable, "-c", "import sys; sys.exit(0)"]
    report = bench_first_hour(
        ("a_plus_question", "trace_list", "missing_index"),
        quorum=fake,
        targets={"trace_list": 0.0},
    )
    by_name = {c["name"]: c for c in report["cases"]}
    assert not by_name["trace_list"]["passed"]
    assert "over the target of 0.0 s" in by_name["trace_list"]["why"]
    assert not by_name["missing_index"]["passed"]
    assert by_name["missing_index"]["why"].startswith("exit 0, not 2")
    assert not by_name["a_plus_question"]["passed"]
    assert by_name["a_plus_question"]["why"].startswith("no submission written")
    assert report["passed"] is False


def test_an_unknown_case_is_one_line_and_exit_2(tmp_path):
    done = run_quorum(quorum_env(tmp_path), "bench", "first-hour", "--only", "trace_lst")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"quorum: error: --only 'trace_lst': no such case; choose from {', '.join(CASES)}"
    ]


def test_bytecode_says_whether_the_shell_forbids_writing_it(monkeypatch):
    from lab.bench.first_hour import bytecode

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert bytecode()["dont_write_bytecode"] is True
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    assert bytecode()["dont_write_bytecode"] is False
