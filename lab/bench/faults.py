"""`quorum bench faults`: a BioASQ batch against a misbehaving endpoint, killed and resumed.

Every model role points at the simulated endpoint with a `FaultPlan` (5xx, 429, replies slower
than the client's timeout, malformed and empty outputs); `quorum bioasq run --phase A+` runs as
a subprocess, is killed with SIGKILL at a seeded point, loses its search backend for a moment
in a later run, and is started again until it exits 0 or `max_runs` is reached. The report
says what came out (answered, duplicates, valid) and how each injected fault was absorbed,
from evidence only: the endpoint saw the client retry the same request, the failed call is in
the run's checkpoints and the node that made it carried on, the question was journalled failed
and answered by a later run, or the question was interrupted by the kill and resumed.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphs.bioasq.journal import journal_path
from lab.bench.drill import Journal, Outage
from lab.bench.fault_evidence import (
    absorbed_kill,
    absorbed_llm,
    absorbed_outage,
    failed_then_answered,
    outcome,
    read_threads,
)
from lab.shared_data import BIOASQ_GOLDEN, CHECKOUT
from lab.simulate.server import FaultPlan, SimulatedEndpoint

GOLDEN = BIOASQ_GOLDEN
LATENCY_S = 0.02
CLIENT_TIMEOUT_S = 1.0
CLIENT_RETRIES = 3
RUN_TIMEOUT_S = 900.0
# How a failed call's node carried on (see the nodes' handling of an error Reply).


def build_testset(target: Path, count: int, source: Path | None = None) -> int:
    """Write the first `count` questions (id, body, type) of `source` or 11B*; return how many.

    Raises:
        FileNotFoundError: `source` is missing, or none is given and ../shared (the default's
            11B*_golden.json) is not beside the checkout; one line that says to pass --input.
    """
    sources = [source] if source is not None else sorted(GOLDEN.glob("11B*_golden.json"))
    if source is None and not sources:
        raise FileNotFoundError(
            f"no BioASQ golden files at {GOLDEN / '11B*_golden.json'} (the default needs "
            "../shared beside the checkout); pass --input FILE"
        )
    if not all(p.is_file() for p in sources):
        raise FileNotFoundError(f"no BioASQ questions at {source}; pass --input FILE")
    picked: list[dict[str, str]] = []
    for path in sources:
        for q in json.loads(path.read_text(encoding="utf-8")).get("questions", []):
            if len(picked) < count:
                picked.append({"id": q["id"], "body": q["body"], "type": q["type"]})
    target.write_text(json.dumps({"questions": picked}, ensure_ascii=False), encoding="utf-8")
    return len(picked)


def batch_env(home: Path, url: str, search: dict[str, str] | None = None) -> dict[str, str]:
    """Return the batch's environment: every model role on the simulator, no fallback search."""

    def spec(name: str) -> dict[str, Any]:
        return {
            "provider": "openai",
            "model": name,
            "base_url": url,
            "timeout_s": CLIENT_TIMEOUT_S,
            "max_retries": CLIENT_RETRIES,
        }

    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    env |= {
        "QUORUM_HOME": str(home),
        "QUORUM_MODELS__QUERY": json.dumps(spec("sim-query")),
        "QUORUM_MODELS__ENSEMBLE": json.dumps([spec("sim-ensemble")]),
        "QUORUM_FALLBACK__ENABLED": "false",
    }
    return env | {f"QUORUM_SEARCH__{k.upper()}": v for k, v in (search or {}).items()}


def bench_faults(
    *,
    questions: int = 100,
    seed: int = 0,
    input_path: Path | None = None,
    plan: FaultPlan | None = None,
    concurrency: int = 4,
    max_runs: int = 4,
    search: dict[str, str] | None = None,
    es_dir: Path | None = None,
    es_port: int | None = None,
    keep: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the drill and return the report (see the module docstring).

    Args:
        questions: test set size, taken from `input_path` (default: 11B*_golden, in order).
        seed: seed of the fault draws and of the kill point.
        input_path: BioASQ JSON to take the questions from.
        plan: the faults; default `FaultPlan(seed=seed)`.
        concurrency: questions the batch answers at once.
        max_runs: runs before giving up on a batch that still fails.
        search: QUORUM_SEARCH__* settings of the batch (backend, elasticsearch_url, index).
        es_dir: work dir of the Elasticsearch node restarted mid-run.
        es_port: that node's port.
        keep: a new directory to run in and keep (QUORUM_HOME, journal, submission, stderr).
        log: where progress lines go; default stderr.
    """
    log = log or (lambda line: print(f"bench faults: {line}", file=sys.stderr, flush=True))
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise FileExistsError(f"{keep} is not empty; --keep wants a new or empty directory")
    began = time.perf_counter()
    rng = random.Random(seed)
    plan = plan or FaultPlan(seed=seed)
    with tempfile.TemporaryDirectory(prefix="quorum-bench-faults-") as tmp:
        work = Path(keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        home, testset, output = work / "home", work / "testset.json", work / "submission.json"
        count = build_testset(testset, questions, input_path)
        kill_after = rng.randint(max(1, count // 10), max(1, count // 2))
        backend = (search or {}).get("backend", "embedded")
        outage = Outage(backend, home / "indexes" / (search or {}).get("index", "demo"))
        outage.es_dir, outage.es_port = es_dir, es_port
        journal = Journal(journal_path(output))
        command = [sys.executable, "-m", "graphs.cli", "bioasq", "run", "--input", str(testset)]
        command += ["--output", str(output), "--phase", "A+", "--concurrency", str(concurrency)]
        # The simulator's query ("simulated") finds passages off every question, so the
        # relevance check refuses each answer: kept, a finished question is resumed from the
        # journal after the kill, as an answered one is, instead of asked again.
        command += ["--keep-insufficient"]
        runs: list[dict[str, Any]] = []
        with SimulatedEndpoint(LATENCY_S, faults=plan) as endpoint:
            env = batch_env(home, endpoint.base_url, search)
            drill = Drill(command, env, work, journal, endpoint, outage, log)
            for number in range(1, max_runs + 1):
                runs.append(drill.run(number, kill_after=kill_after if number == 1 else None))
                if runs[-1]["exit"] == 0:
                    break
            faults, requests = list(endpoint.faults_injected), list(endpoint.requests)
            injected = endpoint.fault_counts()
        if keep is not None:
            seen = {"faults_injected": faults, "requests": requests}
            (work / "endpoint.json").write_text(json.dumps(seen), encoding="utf-8")
        threads = read_threads(home / "checkpoints.sqlite")
        report = outcome(output, testset, journal, count)
        killed = next((r for r in runs if r["exit"] == "killed"), None)
        absorbed = absorbed_llm(faults, requests, threads, runs)
        if killed is not None:
            absorbed["kill"] = absorbed_kill(killed, runs, journal, threads)
        if outage.window is not None:
            absorbed["search_outage"] = absorbed_outage(outage, journal)
    report |= {
        "faults_injected": injected
        | {"kill": int(killed is not None), "search_outage": int(outage.window is not None)},
        "faults_absorbed": absorbed,
        "failed_then_answered": failed_then_answered(journal),
        "runs": len(runs),
        "run_log": runs,
        "seconds": round(time.perf_counter() - began, 1),
        "seed": seed,
        "backend": backend,
    }
    return report


@dataclass
class Drill:
    """Runs the batch subprocess again and again, killing it once and taking search away once."""

    command: list[str]
    env: dict[str, str]
    work: Path
    journal: Journal
    endpoint: SimulatedEndpoint
    outage: Outage
    log: Callable[[str], None]

    def run(self, number: int, *, kill_after: int | None) -> dict[str, Any]:
        """Run the batch once: SIGKILL it after `kill_after` answers, or take search away."""
        first_request, started = len(self.endpoint.requests) + 1, time.time()
        self.log(f"run {number}: started ({self.journal.count()} answered so far)")
        stderr_path = self.work / f"run-{number}.stderr"
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                self.command, env=self.env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=CHECKOUT
            )
            try:
                exit_code = self._watch(proc, number, kill_after)
            finally:
                if proc.poll() is None:  # the bench itself was interrupted
                    proc.kill()
                    proc.wait()
        self.journal.poll(number)
        text = stderr_path.read_text(errors="replace")
        resumed = re.search(r"(\d+) from the journal", text)
        run = {
            "run": number,
            "exit": exit_code,
            "seconds": round(time.time() - started, 1),
            "answered": self.journal.count(run=number),
            "insufficient": self.journal.count("insufficient", run=number),
            "failed": self.journal.count("failed", run=number),
            "resumed": int(resumed.group(1)) if resumed else None,
            "requests": (first_request, len(self.endpoint.requests)),
            "window": (started, time.time()),
        }
        if exit_code not in (0, "killed"):
            run["stderr"] = text.strip().splitlines()[-3:]
        self.log(
            f"run {number}: exit {exit_code} after {run['seconds']} s, {run['answered']} answered"
        )
        return run

    def _watch(self, proc: subprocess.Popen, number: int, kill_after: int | None) -> int | str:
        started = time.time()
        while True:
            time.sleep(0.05)
            self.journal.poll(number)
            if (done := proc.poll()) is not None:
                return done
            if kill_after is not None and self.journal.finished() >= kill_after:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return "killed"
            if time.time() - started > RUN_TIMEOUT_S:
                proc.kill()
                proc.wait()
                return "timed out"
            if (
                self.outage.window is None
                and not kill_after
                and self.journal.finished(run=number) >= 2
            ):
                self.outage(number, self.log)
