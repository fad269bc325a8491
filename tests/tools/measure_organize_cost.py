"""Measure what organizing costs a question: calls and prompt tokens per node, and the path.

The bench question runs through the whole graph (embedded demo index, MiniLM, checkpoints)
with every model role at one OpenAI-compatible endpoint, once per row:

- organize.strategy dedupe, then corg, on the simulator (lab/simulate) as it answers
  without plants: its relation reply is the schema's first label, "duplicated", so every pair
  through the first context is a duplicate and mirroring settles the graph in one round (CORG's
  fewest calls: n - 1 for n contexts);
- corg on the simulator planting a question none of the shown passages belongs to: every pair
  is "none", nothing is mirrored, every pair is asked, one anchor after another (the most:
  n(n - 1)/2 in n - 1 rounds);
- each corg row twice: its groups answered by the ensemble strategy's members (organize
  .corg_answers "ensemble", the default) and by organize's one call per group (the paper's
  aggregator, "organize");
- the default settings (organize.strategy auto: corg on an endpoint) and the shipped presets
  `papers` and `fast`, on the simulator without plants.

Counts are deterministic; prompt tokens are the endpoint's own (the simulator counts
characters / 4); the critical path is read from the calls' times, each simulated call taking
0.2 s (bench pipeline's way). With `--model BASE_URL#NAME` the rows are dedupe and corg
against that server instead (e.g. llama.cpp's), with its tokenizer's counts and wall time.

    uv run python tests/tools/measure_organize_cost.py [--model BASE_URL#NAME] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from graphs.runtime import Progress, build_context, run_question  # noqa: E402
from infra.settings import Settings, load_settings  # noqa: E402
from infra.settings.presets import overlaid, shipped_presets  # noqa: E402
from lab.bench.pipeline import QUESTION, bench_settings, chain_length  # noqa: E402
from lab.simulate.server import SimulatedEndpoint  # noqa: E402

NOBODYS = [
    {
        "id": "elsewhere",
        "question": "Which passage is planted here?",
        "answer": "this one",
        "passages": [
            {"pmid": "planted-0", "role": "gold", "title": "Planted", "text": "Not in the index."}
        ],
    }
]
"""Plants no shown passage belongs to: the planted reader labels every pair it is shown "none"."""


def with_groups(settings: Settings, groups: dict[str, Any]) -> Settings:
    """Return settings with groups laid over them, as `--preset` lays a preset."""
    merged = {g: overlaid(getattr(settings, g).model_dump(), v) for g, v in groups.items()}
    return settings.model_copy(
        update={g: type(getattr(settings, g)).model_validate(v) for g, v in merged.items()}
    )


async def measure(settings: Settings) -> dict[str, Any]:
    """Answer the bench question once; return its calls, tokens and path by node."""
    steps: list[tuple[str, dict[str, Any]]] = []
    context = build_context(settings)
    started = time.perf_counter()
    thread_id, result = await run_question(
        settings,
        QUESTION,
        context=context,
        progress=Progress(on_event=lambda node, update: steps.append((node, update))),
    )
    wall = time.perf_counter() - started
    calls: dict[str, int] = {}
    tokens: dict[str, int] = {}
    path = 0
    organize: dict[str, Any] = {}
    for node, update in steps:
        made = [c for c in update.get("calls") or [] if c.get("kind") != "loglikelihood"]
        calls[node] = calls.get(node, 0) + len(made)
        tokens[node] = tokens.get(node, 0) + sum(c.get("input_tokens") or 0 for c in made)
        path += chain_length(made)
        if node == "organize":
            graph = update.get("relation_graph") or {}
            organize = {
                "strategy": next(
                    (n for n in update.get("notes") or [] if n.startswith("organize: strategy")),
                    "",
                ).removeprefix("organize: strategy "),
                "relation_calls": graph.get("calls", 0),
                "pairs": graph.get("naive_calls", 0),
                "rounds": len(graph.get("rounds") or []),
                "groups": len(update.get("groups") or []),
                "contexts": len(update.get("organized") or []),
            }
    nonzero = {k: v for k, v in calls.items() if v}
    return {
        "llm_calls": sum(calls.values()),
        "prompt_tokens": sum(tokens.values()),
        "critical_path_calls": path,
        "calls_by_node": nonzero,
        "prompt_tokens_by_node": {k: tokens[k] for k in nonzero},
        "organize": organize,
        "wall_s": round(wall, 2),
        "answer_type": result.get("type"),
        "thread_id": thread_id,
    }


def rows(model: str | None) -> list[tuple[str, dict[str, Any], Any]]:
    """Return (name, settings groups, plants) per row; plants None: the simulator unplanted."""
    presets = shipped_presets()
    if model:
        return [
            ("dedupe", {"organize": {"strategy": "dedupe"}}, None),
            ("corg", {"organize": {"strategy": "corg"}}, None),
        ]
    paper = {"organize": {"strategy": "corg", "corg_answers": "organize"}}
    return [
        ("dedupe", {"organize": {"strategy": "dedupe"}}, None),
        ("corg, one round (every pair duplicated)", {"organize": {"strategy": "corg"}}, None),
        ("corg, one round, organize answers (the paper's aggregator)", paper, None),
        ("corg, every pair asked (none related)", {"organize": {"strategy": "corg"}}, NOBODYS),
        ("corg, every pair asked, organize answers", paper, NOBODYS),
        ("default (organize.strategy auto)", {}, None),
        ("--preset papers", presets["papers"], None),
        ("--preset fast", presets["fast"], None),
    ]


def main() -> int:
    """Print one row per configuration (JSON with --json)."""
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--model", help="BASE_URL#NAME of a real OpenAI-compatible server")
    cli.add_argument("--json", action="store_true", help="print one JSON object")
    args = cli.parse_args()
    base = load_settings()
    report: dict[str, Any] = {"question": QUESTION, "rows": {}}
    for name, groups, plants in rows(args.model):
        served = (
            nullcontext(None)
            if args.model
            else SimulatedEndpoint(0.2, planted=plants)  # 0.2 s a call: the path shows
        )
        with served as endpoint:
            url, _, model = (args.model or f"{endpoint.base_url}#sim").partition("#")
            # One slot for a real server (llama.cpp answers one request at a time).
            limit = 1 if args.model else 64
            settings = bench_settings(base, url, models=1, members=5, endpoint_limit=limit)
            specs = settings.models.model_copy(
                update={
                    "query": settings.models.query.model_copy(
                        update={"model": model, "timeout_s": 600.0}
                    ),
                    "ensemble": [
                        s.model_copy(update={"model": model, "timeout_s": 600.0})
                        for s in settings.models.ensemble
                    ],
                }
            )
            settings = with_groups(settings.model_copy(update={"models": specs}), groups)
            report["rows"][name] = asyncio.run(measure(settings))
        print(f"{name}: {json.dumps(report['rows'][name])}", file=sys.stderr)
    if args.json:
        print(json.dumps(report))
    else:
        for name, row in report["rows"].items():
            print(
                f"{name:45} calls {row['llm_calls']:3}  path {row['critical_path_calls']:2}  "
                f"prompt tokens {row['prompt_tokens']:6}  organize {row['organize']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
