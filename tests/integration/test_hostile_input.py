"""Hostile input: every case is one line on stderr, exit code 2, no traceback, no output file.

The cases live in tests/fixtures/hostile/cases.json beside their files: malformed and
mistyped test sets, duplicate ids, 100 KB questions, invalid UTF-8, a gzip that is not gzip,
broken PubMed XML, a path in an index name, bad config files and settings. They run
concurrently (each is its own `quorum` process), then each is checked on its own.
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

QUORUM = str(Path(sys.executable).parent / "quorum")
HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"
CASES = json.loads((HOSTILE / "cases.json").read_text())


def expand(value: str, out: Path) -> str:
    return (
        value.replace("{f}", str(HOSTILE))
        .replace("{out}", str(out))
        .replace("{long}", "Is aspirin effective? " * 4700)
    )


def run_case(case: dict, root: Path) -> tuple[subprocess.CompletedProcess, Path]:
    out = root / "out" / "submission.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    env["QUORUM_HOME"] = str(root / "home")
    env |= {k: expand(v, out) for k, v in case.get("env", {}).items()}
    args = [expand(a, out) for a in case["args"]]
    proc = subprocess.run([QUORUM, *args], capture_output=True, text=True, env=env, timeout=300)
    return proc, out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("hostile")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            c["name"]: pool.submit(run_case, c, root / f"case{i}") for i, c in enumerate(CASES)
        }
        return {name: future.result() for name, future in futures.items()}


def test_the_corpus_has_at_least_30_cases():
    assert len(CASES) >= 30 and len({c["name"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hostile_input_is_one_line_and_exit_2(case, outcomes):
    proc, out = outcomes[case["name"]]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quorum: error: "), proc.stderr
    assert case["message"] in lines[0]
    assert not out.exists()  # nothing half-written


def test_a_data_directory_quorum_may_not_write_is_one_line_naming_it(tmp_path):
    if os.geteuid() == 0:
        home = Path("/sys/quorum-test-home")  # not even root may create a directory in /sys
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        home = locked / "home"
    with pytest.raises(OSError):
        home.mkdir(parents=True)  # the premise: this directory cannot be made
    corpus = HOSTILE.parent.parent / "fixtures" / "shared_excerpts" / "corpus"
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    env["QUORUM_HOME"] = str(home)
    proc = subprocess.run(
        [QUORUM, "index", str(corpus / "pubmed_docs.jsonl.gz"), "--no-embeddings"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"quorum: error: QUORUM_HOME {home} cannot be written")
    assert "set QUORUM_HOME to a" in last
