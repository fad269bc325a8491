"""`quorum bench first-hour`: a new user's first commands, timed against issue 48's targets.

Each command runs as a user runs it: a fresh `quorum` process, the settings' defaults (no
QUORUM_* variable, no config file), the embedded engine and the SmolLM2-135M demo model. The
first `ask` meets an empty data directory (a fresh QUORUM_HOME: the demo index is built and the
GGUF model de-quantized there); every later command runs in that same directory, warm.

A command passes when it did what it should (an answer, a submission, a refusal in one line)
within its target. Beside each wall time is the CPU time its process used (user + system, all
its threads), and the report carries the machine's load average: these 2 cores are often
shared, and a wall time means little without them. `quorum --help` is timed first, the same
way: each figure is also given in multiples of it, so figures from different machines compare
as ratios.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUESTION = (
    "Do mitochondria play a role in remodelling lace plant leaves during programmed cell death?"
)
"""The README's first question (its document is in the demo corpus: PMID 21645374)."""
A_PLUS_QUESTION = "Is adjustment for reporting heterogeneity necessary in sleep disorders?"
"""The A+ case's question: another of the demo corpus's (PMID 26852225), so that none of its
model calls comes from the reply cache the asks before it filled."""

TARGETS_S: dict[str, float] = {
    "cold_ask": 60.0,
    "warm_ask": 30.0,
    "a_plus_question": 45.0,
    "trace_list": 1.5,
    "missing_index": 2.0,
}
"""Each case's target wall time on 2 idle cores (issue 48, item 1), in the order they run."""

CASES = tuple(TARGETS_S)
HELP_RUNS = 3
"""`quorum --help` runs timed before the cases; the median is the yardstick."""


@dataclass(frozen=True)
class Case:
    """One command of the first hour and what it must do to count."""

    name: str
    args: tuple[str, ...]
    check: Callable[[subprocess.CompletedProcess, Path], str | None]
    """Return why the run did not do what it should, or None when it did."""


def _answered(done: subprocess.CompletedProcess, work: Path) -> str | None:
    return None if done.returncode == 0 else f"exit {done.returncode}: {_last_line(done)}"


def _submitted(done: subprocess.CompletedProcess, work: Path) -> str | None:
    if done.returncode != 0:
        return f"exit {done.returncode}: {_last_line(done)}"
    try:
        questions = json.loads((work / "submission.json").read_text())["questions"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"no submission written ({exc})"
    return None if len(questions) == 1 else f"{len(questions)} questions in the submission"


def _refused_in_one_line(done: subprocess.CompletedProcess, work: Path) -> str | None:
    lines = done.stderr.strip().splitlines()
    if done.returncode != 2:
        return f"exit {done.returncode}, not 2: {_last_line(done)}"
    if len(lines) != 1 or "nosuch" not in lines[0]:
        return f"not one line naming the index: {done.stderr.strip()[:300]!r}"
    return None


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = (done.stderr or done.stdout or "").strip().splitlines()
    return lines[-1][:300] if lines else "no output"


def cases(work: Path) -> dict[str, Case]:
    """Return the five cases; the A+ question reads a one-question test set written in `work`."""
    testset = work / "testset.json"
    return {
        "cold_ask": Case("cold_ask", ("ask", QUESTION), _answered),
        "warm_ask": Case("warm_ask", ("ask", QUESTION), _answered),
        "a_plus_question": Case(
            "a_plus_question",
            (
                "bioasq",
                "run",
                "--input",
                str(testset),
                "--output",
                str(work / "submission.json"),
                "--phase",
                "A+",
            ),
            _submitted,
        ),
        "trace_list": Case("trace_list", ("trace", "list"), _answered),
        "missing_index": Case(
            "missing_index", ("ask", "--index", "nosuch", QUESTION), _refused_in_one_line
        ),
    }


def _testset(path: Path) -> None:
    question = {"id": "first-hour-1", "type": "yesno", "body": A_PLUS_QUESTION}
    path.write_text(json.dumps({"questions": [question]}))


def quorum_env(home: Path) -> dict[str, str]:
    """Return this environment without QUORUM_* settings (the defaults), rooted at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    return env | {"QUORUM_HOME": str(home)}


def bench_first_hour(
    only: Sequence[str] = CASES,
    *,
    quorum: Sequence[str] | None = None,
    targets: dict[str, float] | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Run the cases in `only` (in CASES' order) in a fresh data directory; report each.

    Args:
        only: the cases to run, by name.
        quorum: the command that starts quorum (default: this interpreter's `-m graphs.cli`).
        targets: seconds allowed per case, over TARGETS_S.
        say: where a line of progress goes as each case starts and ends.
    """
    unknown = [name for name in only if name not in TARGETS_S]
    if unknown:
        raise ValueError(f"unknown case {unknown[0]!r}; choose from {', '.join(CASES)}")
    command = list(quorum or [sys.executable, "-m", "graphs.cli"])
    allowed = TARGETS_S | (targets or {})
    load_before = os.getloadavg()
    compiled = bytecode()
    if not compiled["installed_compiled"] and compiled["dont_write_bytecode"]:
        say(
            "first-hour: the installed packages carry no bytecode and PYTHONDONTWRITEBYTECODE is "
            "set, so every command compiles torch and transformers from source again; "
            "`uv sync --locked --compile-bytecode` (README) compiles them once"
        )
    rows = []
    with tempfile.TemporaryDirectory(prefix="quorum-first-hour-") as scratch:
        work = Path(scratch)
        home = work / "home"
        _testset(work / "testset.json")
        env = quorum_env(home)
        chosen = cases(work)
        # Rounded once, here: the ratios below are computed from the figures the report shows,
        # so a reader dividing them gets the same number.
        help_s = round(_help_seconds(command, env, work), 3)
        say(f"first-hour: quorum --help: {help_s:.2f} s (the median of {HELP_RUNS}: the yardstick)")
        needs_warm = {"warm_ask", "a_plus_question"} & set(only)
        if needs_warm and "cold_ask" not in only:  # warm means after a first ask: run one, untimed
            say("first-hour: a first ask, untimed, so the data directory is warm…")
            _run(command, chosen["cold_ask"], env, work)
        for name in CASES:
            if name in only:
                say(f"first-hour: {name}: quorum {_shown(chosen[name].args)}…")
                rows.append(_timed(command, chosen[name], allowed[name], env, work))
                row = rows[-1]
                row["help_ratio"] = round(row["seconds"] / help_s, 1)
                verdict = "met" if row["passed"] else f"MISSED ({row['why']})"
                say(
                    f"first-hour: {name}: {row['seconds']:.2f} s of {row['target_s']} s "
                    f"({row['help_ratio']:g}× --help): {verdict}"
                )
    return {
        "cases": rows,
        "help_s": help_s,
        "passed": all(row["passed"] for row in rows),
        "loadavg": [round(x, 2) for x in load_before],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "bytecode": compiled,
        "home": "fresh (a new temporary QUORUM_HOME, removed after)",
    }


def bytecode() -> dict[str, bool]:
    """Say whether imports read compiled bytecode: the largest cost a machine's set-up adds.

    Without it each process compiles torch, transformers and sentence-transformers from source:
    a warm demo ask took 44 s instead of 16 s on this project's 2-core machine (docs/measured.md).
    """
    spec = importlib.util.find_spec("torch")  # found, not imported
    cached = spec.cached if spec is not None else None
    return {
        "installed_compiled": bool(cached) and Path(cached).exists(),
        "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
    }


def _help_seconds(command: list[str], env: dict[str, str], work: Path) -> float:
    """Return the median wall time of `quorum --help`, every case's yardstick."""
    help_case = Case("help", ("--help",), _answered)
    times = []
    for _ in range(HELP_RUNS):
        started = time.perf_counter()
        _run(command, help_case, env, work)
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def _timed(
    command: list[str], case: Case, target: float, env: dict[str, str], work: Path
) -> dict[str, Any]:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = _run(command, case, env, work)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    why = case.check(done, work) if done is not None else "timed out after 600 s"
    if why is None and seconds > target:
        why = f"{seconds:.2f} s over the target of {target} s"
    return {
        "name": case.name,
        "command": f"quorum {_shown(case.args)}",
        "seconds": round(seconds, 3),
        "cpu_s": round(cpu, 3),
        "target_s": target,
        "passed": why is None,
        "why": why,
    }


def _run(
    command: list[str], case: Case, env: dict[str, str], work: Path
) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            [*command, *case.args],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        return None


def _shown(args: Sequence[str]) -> str:
    return " ".join(f'"{a}"' if " " in a else a for a in args)
