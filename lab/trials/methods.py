"""`quorum eval methods`: each paper's method answering through the graph, scored against gold.

Every case runs the answering part of the phase-B graph (given_evidence → organize → ensemble
→ synthesize → finalize) once per strategy: an ensemble strategy is `ensemble.strategy`;
"corg" is `organize.strategy = corg` answering its groups itself (`organize.corg_answers =
organize`, the paper's aggregator, as its baselines answer), so no member is asked. The answer
scored is the graph's final exact answer (its first candidate), so a method whose decision the
answer ignores scores like the baseline it did not beat.

Against the planted reader (`reader="planted"`), a SimulatedEndpoint is started in-process
with the cases as plants (lab/trials/datasets.py) and every model role points at it
(provider openai, prompt log-probabilities on, response cache off); its settings, as
GET /v1/reader serves them, head the report. Without it, the configured models answer,
unchanged.

Per strategy: accuracy with a 95% Wilson interval and LLM calls per question (chat and
log-likelihood calls of every node). MoI: the Spearman correlation of the position weights
its fits record with the reader's planted curve at the same number of positions, averaged
over fits (a fit with flat weights counts 0). CORG (cases with planted pairs): the share of
counterfactual pairs whose two sides end in different groups and in no group together, the
share of duplicate pairs of which exactly one passage is kept, and relation calls and pairs
per question. CORG on ConflictQA: corg_plural_on_conflict, the share of cases with a planted
counterfactual it answered plurally (the decision keeps both sides) or below the confidence
gate; corg_confident_without_conflict, the share of the same cases, the counterfactual passage
and its duplicate left out, it answered with one confident answer.

Beside each method, its controls (lab/trials/controls.py): the method's own settings, K and m
included, with one mechanism removed, paired with the method question by question; with
`ablations`, the papers' ablation tables too. Every row of "strategies" carries the K
(members) and m (contexts) it ran at.

What the planted reader can show, and what it cannot: its answers come from plants quorum wrote
(who reads which passage, how position biases it), so a run against it shows that a method is
wired (its decision reaches the answer, its views differ) and that removing a mechanism changes
decisions (the paired counts a/b of a method and its control). It never shows that a method
helps: the gains it shows are the simulator's assumptions read back. So no default is ever
chosen on it, and a method that does not beat its control under it is reported as such, not
tuned until it does; only configured models (real readers) can show a gain.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.checkpoint.memory import InMemorySaver

from graphs.runtime import GraphRunner, check_models
from infra.embeddings import BackgroundEmbedder, Embedder
from infra.models import ModelPool
from infra.settings import ModelSpec, Settings
from lab.simulate.reader import ReaderSettings, position_curve
from lab.simulate.server import SimulatedEndpoint
from lab.trials.controls import (
    CORG,
    WITHOUT_COUNTERFACTUAL,
    Arm,
    ablations_report,
    control_lines,
    controls_report,
    measured,
    plan_arms,
)
from lab.trials.datasets import MethodCase
from lab.trials.method_rows import Row, curve_spearman, score
from lab.trials.organize import without_counterfactual
from nodes.context import Context

CONCURRENCY = 4
"""Cases in flight at once per strategy (each model also bounds its own calls)."""
PLANTED_MODEL = "planted-reader"


class NoSearch:
    """Phase B never searches: a backend that says so if anything asks."""

    name = "none"

    def _refuse(self, *_: Any) -> Any:
        raise RuntimeError("eval methods answers from given passages; nothing may search")

    validate = search = fetch = similarities = nearest = has = count = _refuse


def planted_settings(settings: Settings, base_url: str) -> Settings:
    """Return settings whose every model role is the planted reader at base_url."""
    spec = ModelSpec(
        provider="openai", model=PLANTED_MODEL, base_url=base_url, prompt_logprobs=True
    )
    models = settings.models.model_copy(
        update={
            "query": spec,
            "refine": None,
            "organize": None,
            "ensemble": [spec],
            "synthesis": None,
            "cache": "off",
        }
    )
    return settings.model_copy(update={"models": models})


def reader_settings(base_url: str) -> dict[str, Any]:
    """Return the reader's settings as its endpoint serves them (GET /v1/reader)."""
    with urllib.request.urlopen(f"{base_url}/reader", timeout=10) as response:
        return json.loads(response.read())


async def _run_arm(
    runner: GraphRunner,
    ctx: Context,
    cases: list[MethodCase],
    arm: Arm,
    progress: Callable[[str], None],
) -> list[Row]:
    gate = asyncio.Semaphore(CONCURRENCY)
    done = 0

    async def one(case: MethodCase) -> Row:
        nonlocal done
        thread = f"eval-methods-{uuid.uuid4().hex}"
        inputs = {"question": case.question, "qtype": case.qtype, "given": case.given()}
        async with gate:
            try:
                outcome = await runner.run(ctx, inputs, thread_id=thread)
                row = score(case, arm, outcome.values)
            except Exception as exc:  # one failing case is scored wrong, never sinks the run
                first = (str(exc).splitlines() or [""])[0][:300]
                row = Row(arm.label, case.id, "", list(case.gold), False, None, 0)
                row.error = f"{type(exc).__name__}: {first}"
            finally:
                await runner.graph.checkpointer.adelete_thread(thread)
        done += 1
        if done % 10 == 0 or done == len(cases):
            progress(f"{arm.label}: {done}/{len(cases)} questions")
        return row

    return list(await asyncio.gather(*(one(case) for case in cases)))


def summarize(
    arms: list[Arm],
    rows: dict[str, list[Row]],
    strategies: Sequence[str],
    curve: Callable[[int], list[float]] | None,
) -> dict[str, Any]:
    """Return the report's measures from every run's rows."""
    by_label = {arm.label: arm for arm in arms}
    correct = {label: [r.correct for r in got] for label, got in rows.items()}
    strategies_report = {}
    for name in strategies:
        got = rows[name]
        strategies_report[name] = measured(by_label[name], correct[name]) | {
            "llm_calls": round(float(np.mean([r.calls for r in got])), 2) if got else None,
        }
    for name, got in strategies_report.items():
        if errors := [r.error for r in rows[name] if r.error is not None]:
            # Failed questions count as wrong; the first error says why.
            got |= {"failed": len(errors), "error": errors[0]}
    fits = [w for r in rows.get("moi", []) for w in r.moi_position_weights or []]
    spearman = None
    if curve is not None and fits:
        spearman = round(float(np.mean([curve_spearman(w, curve) for w in fits])), 4)
    measures = [r.corg for r in rows.get(CORG, []) if r.corg is not None]
    collapsed = [c for m in measures for c in m["duplicates_collapsed"]]
    split = [s for m in measures for s in m["counterfactuals_split"]]
    plural = [m["plural_or_below_gate"] for m in measures if m["conflict"]]
    alone = rows.get(f"{CORG}/{WITHOUT_COUNTERFACTUAL}", [])
    confident = [r.corg["confident"] for r in alone if r.corg is not None]
    recall = {label: [r.recalled for r in got] for label, got in rows.items()}
    return {
        "strategies": strategies_report,
        "controls": controls_report(by_label, correct, strategies),
        "ablations": ablations_report(by_label, correct, recall, strategies),
        "moi_position_spearman": spearman,
        "corg_counterfactual_split": _share(split),
        "corg_duplicate_collapse": _share(collapsed),
        "corg_plural_on_conflict": _share(plural),
        "corg_confident_without_conflict": _share(confident),
        "corg_relation_calls": _mean([m["relation_calls"] for m in measures]),
        "corg_pairs": _mean([m["pairs"] for m in measures]),
    }


def _share(flags: list[bool]) -> float | None:
    return round(float(np.mean(flags)), 4) if flags else None


def _mean(values: list[int]) -> float | None:
    return round(float(np.mean(values)), 2) if values else None


async def evaluate_methods(
    settings: Settings,
    cases: list[MethodCase],
    strategies: Sequence[str],
    *,
    ablations: bool = False,
    embedder: Embedder | None = None,
    curve: Callable[[int], list[float]] | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[dict[str, Any], dict[str, list[Row]]]:
    """Answer every case with every strategy and its controls; return (report, rows).

    Args:
        settings: The models and every setting (a run changes only its own).
        cases: The cases (lab/trials/datasets.py).
        strategies: Ensemble strategy names and/or "corg"; each one's controls run beside it.
        ablations: Also run the papers' ablation tables (lab/trials/controls.py).
        embedder: Shared by every run; loaded from settings when None.
        curve: The planted reader's position curve by the number of positions shown (for
            MoI's Spearman); None against real models.
        progress: Called with one line of progress at a time.
    """
    embedder = embedder or BackgroundEmbedder(settings.embeddings)
    async with GraphRunner(settings, phase="B", checkpointer=InMemorySaver()) as runner:
        arms = plan_arms(settings, strategies, ablations=ablations)
        variants = {
            "all": cases,
            WITHOUT_COUNTERFACTUAL: [
                without_counterfactual(c) for c in cases if c.pairs("counterfactual")
            ],
        }
        rows: dict[str, list[Row]] = {}
        done: list[Arm] = []
        for arm in arms:
            # A run with the settings of one already made (CCV's ablation at its own K, CoBag's
            # permute_vote control where ensemble.members/contexts are CoBag's) is that run: its
            # rows are copied under the new label, never answered twice.
            same = next(
                (d for d in done if (d.settings, d.cases) == (arm.settings, arm.cases)), None
            )
            if same is not None:
                rows[arm.label] = [
                    dataclasses.replace(r, strategy=arm.label) for r in rows[same.label]
                ]
                progress(f"{arm.label}: the run of {same.label}")
                continue
            ctx = Context(
                settings=arm.settings,
                search=NoSearch(),
                embedder=embedder,
                models=ModelPool(arm.settings),
            )
            started = time.perf_counter()
            got = variants[arm.cases]
            rows[arm.label] = await _run_arm(runner, ctx, got, arm, progress)
            right = sum(r.correct for r in rows[arm.label])
            took = time.perf_counter() - started
            progress(f"{arm.label}: accuracy {right}/{len(got)} ({took:.1f} s)")
            done.append(arm)
    return summarize(arms, rows, strategies, curve), rows


def write_rows(path: Path, rows: dict[str, list[Row]]) -> None:
    """Write one JSON line per (run, case), for audit."""
    with path.open("w", encoding="utf-8") as fh:
        for got in rows.values():
            for row in got:
                fh.write(json.dumps(dataclasses.asdict(row), ensure_ascii=False) + "\n")


def table(report: dict[str, Any]) -> list[str]:
    """Return the report as the lines of a compact text table, each method's controls beside it."""
    reader = report.get("reader") or {}
    shown = ("mode", "curve", "strength", "seed")
    told = ", ".join(f"{k} {reader[k]}" for k in shown if k in reader)
    lines = [
        f"{report['dataset']}: {report['questions']} questions; reader: {told or 'configured'}",
        f"{'strategy':<18}{'accuracy':>9}{'95% CI':>17}{'K':>4}{'m':>4}{'calls/q':>9}{'failed':>8}",
    ]
    controls = report.get("controls") or {}
    for name, got in report["strategies"].items():
        lo, hi = got["ci95"]
        accuracy = "—" if got["accuracy"] is None else f"{got['accuracy']:.3f}"
        calls = "—" if got["llm_calls"] is None else f"{got['llm_calls']:.1f}"
        interval = f"[{lo:.3f}, {hi:.3f}]"
        lines.append(
            f"{name:<18}{accuracy:>9}{interval:>17}{got['members']:>4}{got['contexts']:>4}"
            f"{calls:>9}{got.get('failed', 0):>8}"
        )
        lines += control_lines({"controls": {name: controls[name]}} if name in controls else {})
    lines += control_lines({"ablations": report.get("ablations") or {}})
    for key in (
        "moi_position_spearman",
        "corg_counterfactual_split",
        "corg_duplicate_collapse",
        "corg_plural_on_conflict",
        "corg_confident_without_conflict",
        "corg_relation_calls",
        "corg_pairs",
    ):
        value = report.get(key)
        lines.append(f"{key:<32}{'—' if value is None else value}")
    return lines


def progress_line(line: str) -> None:
    """Print one progress line on stderr."""
    print(f"eval methods: {line}", file=sys.stderr, flush=True)


def run_methods(
    settings: Settings,
    cases: list[MethodCase],
    strategies: Sequence[str],
    *,
    dataset: str,
    planted: ReaderSettings | None = None,
    ablations: bool = False,
    embedder: Embedder | None = None,
    progress: Callable[[str], None] = progress_line,
) -> tuple[dict[str, Any], dict[str, list[Row]]]:
    """Evaluate against the planted reader (started here, in-process) or the configured models."""
    head: dict[str, Any] = {"dataset": dataset, "questions": len(cases)}
    if planted is None:
        check_models(settings)
        roles = {role: spec.model for role, spec in settings.models.by_role()}
        head = {"reader": {"mode": "configured", "models": roles}, **head}
        report, rows = asyncio.run(
            evaluate_methods(
                settings,
                cases,
                strategies,
                ablations=ablations,
                embedder=embedder,
                progress=progress,
            )
        )
        return head | report, rows
    with SimulatedEndpoint(0.0, planted=[c.plant() for c in cases], reader=planted) as endpoint:
        served = reader_settings(endpoint.base_url)
        progress(f"planted reader at {endpoint.base_url}: {json.dumps(served, sort_keys=True)}")

        def curve(n: int) -> list[float]:
            return position_curve(planted.curve, planted.strength, n)

        report, rows = asyncio.run(
            evaluate_methods(
                planted_settings(settings, endpoint.base_url),
                cases,
                strategies,
                ablations=ablations,
                embedder=embedder,
                curve=None if planted.curve == "flat" else curve,
                progress=progress,
            )
        )
    return {"reader": served, **head} | report, rows
