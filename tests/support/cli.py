"""Run the installed `quorum` command as a user would, with a clean environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

QUORUM = str(Path(sys.executable).parent / "quorum")
"""The installed `quorum` command."""


def quorum_env(home: Path) -> dict[str, str]:
    """Return this process's environment without QUORUM_* settings, rooted at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    return env | {"QUORUM_HOME": str(home)}


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


def run_quorum(
    env: dict[str, str], *args: str, stdin: str | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run `quorum` as a user would, capturing its output."""
    return subprocess.run(
        [QUORUM, *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout
    )
