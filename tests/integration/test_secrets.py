"""A recognisable fake API key never lands in anything a batch writes or prints."""

import json
import subprocess
import sys
from pathlib import Path

from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import simulated_env

QUORUM = str(Path(sys.executable).parent / "quorum")
KEY = "sk-quorum-FAKE-7f3a9c1e5b2d4f60"


def test_no_key_in_journal_submission_checkpoints_cache_traces_or_output(tmp_path):
    testset = tmp_path / "t.json"
    testset.write_text(
        json.dumps(
            {
                "questions": [
                    {
                        "id": "s1",
                        "body": "Do mitochondria act in lace plant cell death?",
                        "type": "yesno",
                    },
                    {
                        "id": "s2",
                        "body": "Which organelles act in plant cell death?",
                        "type": "list",
                    },
                ]
            }
        )
    )
    home = tmp_path / "home"
    out = tmp_path / "run" / "submission.json"
    printed = []
    with SimulatedEndpoint(0.0, fail_first=3) as endpoint:  # 429s: retried, logged
        env = simulated_env(
            endpoint.base_url, home, api_key_env="QUORUM_FAKE_KEY", QUORUM_FAKE_KEY=KEY
        )
        for args in (
            ["bioasq", "run", "--input", str(testset), "--output", str(out), "--phase", "A+"],
            ["trace", "list", "--json"],
        ):
            proc = subprocess.run(
                [QUORUM, *args], capture_output=True, text=True, env=env, timeout=300
            )
            assert proc.returncode == 0, proc.stderr
            printed += [proc.stdout, proc.stderr]
        thread = json.loads(printed[2])[0]["thread_id"]
        for args in (
            ["trace", "show", thread, "--json"],
            ["trace", "export", thread, "--html", str(tmp_path / "run" / "trace.html")],
        ):
            proc = subprocess.run(
                [QUORUM, *args], capture_output=True, text=True, env=env, timeout=300
            )
            assert proc.returncode == 0, proc.stderr
            printed += [proc.stdout, proc.stderr]
        assert endpoint.rejected == 3 and endpoint.stats.calls > 0  # the key was really used
    assert all(KEY not in text for text in printed)
    written = [p for root in (home, tmp_path / "run") for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "checkpoints.sqlite" for p in written) and out.exists()
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
