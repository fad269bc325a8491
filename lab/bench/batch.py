"""`quorum bench batch`: does a BioASQ batch keep its questions' LLM waits overlapped?

Every model role points at a simulated endpoint that answers after a fixed latency L. One
question asked alone shows its chain of dependent calls C (calls of one wave overlap), so
a batch of N questions answered C' at a time cannot finish before N / C' · C · L: the ideal.
The batch then runs as `quorum bioasq run` runs it (journal, checkpoints, submission), and the
report gives wall / ideal — how much the bound on calls in flight and the CPU work between
calls (search, embedding, snippets) cost the batch.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from graphs.bioasq.journal import journal_path
from graphs.bioasq.run import run_batch
from graphs.runtime import build_context
from infra.models import endpoint_limit
from infra.settings import Settings
from lab.bench.faults import build_testset
from lab.bench.pipeline import QUESTION, bench_settings, run_once
from lab.simulate.server import SimulatedEndpoint


def bench_batch(
    base: Settings,
    *,
    questions: int = 50,
    concurrency: int = 16,
    latency_s: float = 1.0,
    input_path: Path | None = None,
) -> dict[str, Any]:
    """Run one question alone, then a batch of `questions` at `concurrency`; report both."""
    with tempfile.TemporaryDirectory(prefix="quorum-bench-batch-") as tmp:
        work = Path(tmp)
        testset = work / "testset.json"
        count = build_testset(testset, questions, input_path)
        with SimulatedEndpoint(latency_s) as endpoint:
            settings = bench_settings(
                base.model_copy(update={"home": work / "home"}),
                endpoint.base_url,
                models=1,
                members=base.ensemble.members,
                endpoint_limit=None,  # the default bound, sized for the batch, is what is measured
            )
            context = build_context(settings, questions_in_flight=concurrency)
            context.embedder.embed_query("warm up")  # model loading is not batch time
            context.search.count()

            async def measure() -> tuple[dict[str, Any], float, Any]:
                # One event loop for both runs: the endpoints' HTTP clients belong to it.
                alone = await run_once(settings, context, endpoint)
                endpoint.stats.max_in_flight = 0
                started = time.perf_counter()
                report = await run_batch(
                    context,
                    testset,
                    work / "submission.json",
                    phase="A+",
                    concurrency=concurrency,
                    progress=False,
                )
                return alone, time.perf_counter() - started, report

            alone, wall, report = asyncio.run(measure())
            peak = endpoint.stats.max_in_flight
        records = journal_path(work / "submission.json").read_text(encoding="utf-8").splitlines()
        made = [r["llm_calls"] for r in map(json.loads, records) if "llm_calls" in r]
    spec = settings.models.ensemble[0]
    ideal = count / concurrency * alone["critical_path_calls"] * latency_s
    return {
        "questions": count,
        "answered": report.answered,
        # The support check may refuse a simulated answer: an honest outcome, not a lost one.
        "insufficient": len(report.insufficient),
        "concurrency": concurrency,
        "llm_latency_s": latency_s,
        "question": QUESTION,
        "chain_calls": alone["critical_path_calls"],
        # A question refused before synthesis makes fewer calls than the chain it is measured by.
        "fewest_calls": min(made, default=0),
        "alone_s": alone["wall_s"],
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "wall_over_ideal": round(wall / ideal, 2) if ideal else None,  # no latency: no ideal
        "endpoint_limit": endpoint_limit(spec, settings, concurrency),
        "max_in_flight": peak,
    }
