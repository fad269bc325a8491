"""`quorum eval methods` reader options: --reader-set, its shorthands, and --reader local."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from infra.settings import ModelSpec
from lab.simulate.reader import ReaderSettings
from tests.support.cli import quorum_env, run_quorum

NQ = Path(__file__).resolve().parents[1] / "fixtures" / "eval_methods" / "nq_open_sample.jsonl.gz"
KEYS = [f.name for f in fields(ReaderSettings)]


def methods(home: Path, *args: str, env: dict[str, str] | None = None):
    return run_quorum(
        env or quorum_env(home), "eval", "methods", "--dataset", str(NQ), *args, timeout=600
    )


def test_reader_set_reaches_the_reader_and_heads_the_report(quorum_home):
    proc = methods(
        quorum_home,
        "--reader",
        "planted",
        "--reader-set",
        "curve=u",
        "--reader-set",
        "interaction=0",
        "--reader-set",
        "cite_mismatch=0.5",
        "--reader-seed",
        "4",
        "--limit",
        "2",
        "--strategies",
        "single",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout)["reader"]
    assert set(KEYS) <= set(served) and served["mode"] == "planted"
    expected = ReaderSettings(curve="u", interaction=0.0, cite_mismatch=0.5, seed=4)
    assert {k: served[k] for k in KEYS} == expected.as_dict()
    default = methods(quorum_home, "--reader", "planted", "--limit", "1", "--strategies", "single")
    assert default.returncode == 0, default.stderr[-3000:]
    assert '"curve": "liu"' in default.stderr  # the reader's settings, as served, in the log


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reader-set", "colour=1"], "unknown reader setting 'colour'"),
        (["--reader-set", "override"], "unknown reader setting 'override'"),
        (["--reader-set", "strength=deep"], "strength: 'deep' is not a number"),
        (["--reader-set", "seed=0.5"], "seed: '0.5' is not an integer"),
        (["--reader-set", "cite_mismatch=2"], "cite_mismatch must be in [0, 1]"),
        (["--reader-set", "curve=zigzag"], "curve must be one of"),
    ],
)
def test_a_bad_reader_setting_is_one_line_naming_the_keys(quorum_home, args, message):
    proc = methods(quorum_home, "--reader", "planted", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert ", ".join(KEYS) in proc.stderr


@pytest.mark.parametrize("reader", [[], ["--reader", "local"]])
def test_reader_settings_need_the_planted_reader(quorum_home, reader):
    proc = methods(quorum_home, *reader, "--reader-set", "seed=1")
    assert proc.returncode == 2 and "need --reader planted" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_reader_local_replaces_every_configured_model_with_the_demo_model(quorum_home):
    remote = {"provider": "openai", "model": "elsewhere", "base_url": "http://127.0.0.1:9/v1"}
    env = quorum_env(quorum_home) | {
        "QUORUM_MODELS__QUERY": json.dumps(remote),
        "QUORUM_MODELS__ENSEMBLE": json.dumps([remote]),
    }
    args = ("--reader", "local", "--limit", "1", "--strategies", "single", "--json")
    proc = methods(quorum_home, *args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reader = json.loads(proc.stdout)["reader"]
    assert reader["mode"] == "configured"
    assert set(reader["models"].values()) == {ModelSpec().model}
