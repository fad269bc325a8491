"""`quorum bench pipeline`: how well the whole graph overlaps its LLM calls.

Every model role points at a local simulated OpenAI-compatible endpoint that answers a
schema-valid output after a fixed delay, so wall time is almost all waiting and the figures
isolate the pipeline's concurrency: with latency L, a pipeline whose longest chain of
dependent calls is C calls cannot finish before C·L; it fans out well when wall ≈ C·L while
the number of calls is many times C.

critical_path_calls is measured, not assumed: per node execution, the longest chain of its
calls where each starts after the previous one ended (calls of one wave overlap), summed over
the nodes in the order they ran.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from graphs.runtime import Progress, build_context, run_question
from infra.settings import ModelSpec, Settings
from lab.simulate.server import SimulatedEndpoint

QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"


def chain_length(calls: list[dict[str, Any]]) -> int:
    """Return the longest chain of calls that ran one after another (greedy by end time)."""
    spans = sorted((c["started"], c["started"] + c["latency_s"]) for c in calls if c.get("started"))
    count, free_at = 0, float("-inf")
    for start, end in sorted(spans, key=lambda s: s[1]):
        if start >= free_at - 1e-3:  # 1 ms of clock slack between one call and the next
            count, free_at = count + 1, end
    return count


def bench_settings(
    base: Settings, url: str, *, models: int, members: int, endpoint_limit: int | None = 64
) -> Settings:
    """Point every role at the simulator: one query model, `models` ensemble models.

    `endpoint_limit`: each endpoint's own bound on calls in flight (None: the default bound).
    """

    def spec(name: str) -> ModelSpec:
        return ModelSpec(
            provider="openai",
            model=name,
            base_url=url,
            max_retries=0,
            max_concurrency=endpoint_limit,
        )

    return base.model_copy(
        update={
            "models": base.models.model_copy(
                update={
                    "query": spec("sim-query"),
                    "refine": None,
                    "organize": None,
                    "synthesis": None,
                    "ensemble": [spec(f"sim-ensemble-{i + 1}") for i in range(models)],
                    # A cached run would measure the cache, not the pipeline.
                    "cache": "off",
                }
            ),
            "ensemble": base.ensemble.model_copy(update={"members": members}),
            "fallback": base.fallback.model_copy(update={"enabled": False}),
        }
    )


def bench_pipeline(
    base: Settings, *, latency_s: float, models: int, members: int, runs: int = 1
) -> dict[str, Any]:
    """Run the graph against the simulator `runs` times; report the fastest run's figures."""
    with SimulatedEndpoint(latency_s) as endpoint:
        settings = bench_settings(base, endpoint.base_url, models=models, members=members)
        context = build_context(settings)
        context.embedder.embed_query("warm up")  # model loading is not pipeline time
        context.search.count()

        async def measure() -> list[dict[str, Any]]:
            # One event loop for every run: the endpoints' HTTP clients belong to it.
            return [await run_once(settings, context, endpoint) for _ in range(runs)]

        figures = asyncio.run(measure())
    best = min(figures, key=lambda f: f["wall_s"])
    return best | {
        "llm_latency_s": latency_s,
        "models": models,
        "members": members,
        "runs": runs,
        "bound_s": round(1.3 * best["critical_path_calls"] * latency_s, 3),
        "overlap": round(best["llm_calls"] * latency_s / best["wall_s"], 2),
    }


async def run_once(settings: Settings, context: Any, endpoint: SimulatedEndpoint) -> dict:
    """Answer the bench question once; return its wall time, calls and critical path."""
    steps: list[tuple[str, list[dict[str, Any]], float]] = []

    def on_event(node: str, update: dict[str, Any]) -> None:
        made = [c for c in update.get("calls", []) if c.get("kind") != "loglikelihood"]
        steps.append((node, made, time.perf_counter()))

    before = endpoint.stats.calls
    started = time.perf_counter()
    thread_id, result = await run_question(
        settings, QUESTION, context=context, progress=Progress(on_event=on_event)
    )
    wall = time.perf_counter() - started
    calls = [c for _, made, _ in steps for c in made]
    ends = [started, *(at for _, _, at in steps)]
    return {
        "wall_s": round(wall, 3),
        "llm_calls": endpoint.stats.calls - before,
        "critical_path_calls": sum(chain_length(made) for _, made, _ in steps),
        "failed_calls": sum(c.get("error") is not None for c in calls),
        "strategy": settings.ensemble.strategy,
        "node_s": {node: round(at - ends[i], 3) for i, (node, _, at) in enumerate(steps)},
        "calls_by_node": _by_node([(node, made) for node, made, _ in steps]),
        "max_in_flight": endpoint.stats.max_in_flight,
        "thread_id": thread_id,
        "answer_type": result.get("type"),
    }


def _by_node(steps: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for node, made in steps:
        out[node] = out.get(node, 0) + len(made)
    return out
