"""`quorum bench help`: how long `quorum --help` and every command's --help take.

Each help runs in a fresh process; the target is ≤ 1 s on these 2 cores (issue 29).

Each command's module is imported only when it runs (graphs/cli/__init__.py's COMMANDS, which
`quorum bench help` loads and hands in), so a help text costs the interpreter, typer, rich and
that one module — not the pipeline.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGET_S = 1.0
"""The slowest --help allowed."""


def help_lines(commands: dict[str, Any]) -> list[list[str]]:
    """Return the argument lists timed: --help, then each command's and each subcommand's.

    `commands` maps each command's name to its loaded click command (`graphs.cli.load_command`):
    the CLI hands them in, since nothing below it imports it.
    """
    found = [["--help"]]
    for name, command in commands.items():
        found.append([name, "--help"])
        for sub in getattr(command, "commands", {}):
            found.append([name, sub, "--help"])
    return found


def bench_help(commands: dict[str, Any], repeat: int = 3) -> dict[str, Any]:
    """Time each help `repeat` times in a fresh `quorum` process; report medians and the worst."""
    quorum = str(Path(sys.executable).parent / "quorum")
    rows = []
    for args in help_lines(commands):
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            done = subprocess.run([quorum, *args], capture_output=True, text=True, timeout=120)
            times.append(time.perf_counter() - started)
            if done.returncode != 0:
                raise RuntimeError(f"quorum {' '.join(args)} failed: {done.stderr.strip()}")
        rows.append({"args": " ".join(args), "median_s": round(statistics.median(times), 3)})
    worst = max(rows, key=lambda r: r["median_s"])
    return {
        "helps": len(rows),
        "repeat": repeat,
        "top_level_s": rows[0]["median_s"],
        "slowest": worst,
        "target_s": TARGET_S,
        "met": worst["median_s"] <= TARGET_S,
        "rows": rows,
    }
