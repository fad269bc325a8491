"""Run the installed `quorum` command as a user would, with a clean environment.

The one way tests run it: `quorum(home, ...)` rooted at a data directory with the settings
given, `run_quorum(env, ...)` with a whole environment (the simulated endpoint's), and
`run_quorums` for commands side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

QUORUM = str(Path(sys.executable).parent / "quorum")
"""The installed `quorum` command."""


def quorum_env(home: Path) -> dict[str, str]:
    """Return this process's environment without QUORUM_* settings, rooted at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    return env | {"QUORUM_HOME": str(home)}


ON_THE_QUESTION = {"QUORUM_SEARCH__DENSE_CANDIDATES": "10"}
"""Settings that let a run against the simulated endpoint find passages on its question.

The simulator writes "simulated" for a query, and BM25 finds abstracts about simulation with it,
which the support check rightly refuses as off the question (infra/relevance.py). The dense first
stage adds the documents nearest the question itself (the demo corpus holds its abstract), so
the answer has on-topic evidence without changing a single model call.
"""


def simulated_env(base_url: str, home: Path, **settings: str) -> dict[str, str]:
    """Return a `quorum` process environment whose every model is the simulated endpoint."""
    spec = {"provider": "openai", "model": "sim", "base_url": base_url}
    if key_env := settings.pop("api_key_env", None):
        spec["api_key_env"] = key_env
    return quorum_env(home) | {
        "QUORUM_MODELS__QUERY": json.dumps(spec),
        "QUORUM_MODELS__ENSEMBLE": json.dumps([spec]),
        "QUORUM_FALLBACK__ENABLED": "false",
        **settings,
    }


def run_quorums(
    env: dict[str, str],
    *commands: Sequence[str],
    stdin: str | None = None,
    timeout: int = 600,
) -> list[subprocess.CompletedProcess]:
    """Run `quorum` commands side by side (each pays the CLI's start-up), and wait for all.

    Each gets `stdin` as its input; one still running after `timeout` seconds is killed, with
    the others, and its subprocess.TimeoutExpired raised.
    """
    running = [
        subprocess.Popen(
            [QUORUM, *args],
            stdin=subprocess.PIPE if stdin is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for args in commands
    ]
    done = []
    try:
        for proc in running:
            stdout, stderr = proc.communicate(stdin, timeout=timeout)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    finally:
        for proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return done


def run_quorum(
    env: dict[str, str], *args: str, stdin: str | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run one `quorum` command in `env`, capturing its output."""
    (proc,) = run_quorums(env, args, stdin=stdin, timeout=timeout)
    return proc


def quorum(
    home: Path, *args: str, stdin: str | None = None, timeout: int = 600, **settings: str
) -> subprocess.CompletedProcess:
    """Run one `quorum` command rooted at `home`, with the QUORUM_* `settings` given."""
    return run_quorum(quorum_env(home) | settings, *args, stdin=stdin, timeout=timeout)
