"""`quorum eval methods`: each paper's method answering through the graph, scored against gold.

Every case runs the answering part of the phase-B graph (given_evidence → organize → ensemble
→ synthesize → finalize) once per strategy: an ensemble strategy is `ensemble.strategy`;
"corg" is `organize.strategy = corg` with `CORG_ENSEMBLE` as the ensemble strategy. The answer
scored is the graph's final exact answer (its first candidate), so a method whose decision the
answer ignores scores like the baseline it did not beat.

Against the planted reader (`reader="planted"`), a SimulatedEndpoint is started in-process
with the cases as plants (graphs/eval/datasets.py) and every model role points at it
(provider openai, prompt log-probabilities on, response cache off); its settings, as
GET /v1/reader serves them, head the report. Without it, the configured models answer,
unchanged.

Per strategy: accuracy with a 95% Wilson interval and LLM calls per question (chat and
log-likelihood calls of every node). MoI: the Spearman correlation of the position weights
its fits record with the reader's planted curve at the same number of positions, averaged
over fits (a fit with flat weights counts 0). CORG (cases with planted pairs): the share of
counterfactual pairs whose two sides end in different groups and in no group together, the
share of duplicate pairs of which exactly one passage is kept, and relation calls and pairs
per question.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.checkpoint.memory import InMemorySaver
from scipy.stats import spearmanr

from graphs.eval.answers import wilson
from graphs.eval.datasets import MethodCase, is_correct
from graphs.eval.organize import pair_outcomes
from graphs.qa import build_graph
from graphs.runtime import check_models
from infra.embeddings import BackgroundEmbedder, Embedder
from infra.models import ModelPool
from infra.settings import ModelSpec, Settings
from infra.simulate.reader import ReaderSettings, position_curve
from infra.simulate.server import SimulatedEndpoint
from nodes.context import Context

CORG = "corg"
CORG_ENSEMBLE = "single"
"""CORG's decision is its groups' aggregate; one member keeps the ensemble out of the way."""
CONCURRENCY = 4
"""Cases in flight at once per strategy (each model also bounds its own calls)."""
PLANTED_MODEL = "planted-reader"


class NoSearch:
    """Phase B never searches: a backend that says so if anything asks."""

    name = "none"

    def _refuse(self, *_: Any) -> Any:
        raise RuntimeError("eval methods answers from given passages; nothing may search")

    validate = search = fetch = similarities = nearest = has = count = _refuse


@dataclass
class Row:
    """One strategy's answer to one case, as written to --rows."""

    strategy: str
    id: str
    answer: str
    gold: list[str]
    correct: bool
    decision: dict[str, Any] | None
    calls: int
    overrode: bool = False
    error: str | None = None
    moi_position_weights: list[list[float]] | None = None
    corg: dict[str, Any] | None = None


def strategy_settings(settings: Settings, name: str) -> Settings:
    """Return the settings that run one strategy: an ensemble strategy, or CORG."""
    if name == CORG:
        organize = settings.organize.model_copy(update={"strategy": CORG})
        ensemble = settings.ensemble.model_copy(update={"strategy": CORG_ENSEMBLE})
        return settings.model_copy(update={"organize": organize, "ensemble": ensemble})
    ensemble = settings.ensemble.model_copy(update={"strategy": name})
    return settings.model_copy(update={"ensemble": ensemble})


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


def top_answer(state: dict[str, Any]) -> str:
    """Return the graph's answer: the first exact candidate (empty when it gave none)."""
    answer = state.get("answer") or {}
    exact = answer.get("exact") or []
    while isinstance(exact, list) and exact:
        exact = exact[0]
    return exact if isinstance(exact, str) else ""


def position_weights(state: dict[str, Any]) -> list[list[float]]:
    """Return every MoI fit's position weights recorded in the decision or the votes."""
    found: list[list[float]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "position_weights" and isinstance(item, list) and item:
                    weights = [float(w) for w in item]
                    if weights not in found:
                        found.append(weights)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(state.get("decision"))
    walk(state.get("votes"))
    return found


def curve_spearman(weights: Sequence[float], curve: Callable[[int], list[float]]) -> float:
    """Return Spearman's rho of recovered weights against the planted curve (flat: 0)."""
    if len(weights) < 2 or len(set(weights)) < 2:
        return 0.0
    rho = spearmanr(weights, curve(len(weights))).statistic
    return 0.0 if rho is None or math.isnan(rho) else float(rho)


def corg_measures(case: MethodCase, state: dict[str, Any]) -> dict[str, Any]:
    """Return how CORG handled a case's planted pairs, and its relation calls and pairs."""
    groups = [g.get("pmids") or [] for g in state.get("groups") or []]
    split, collapsed = pair_outcomes(groups, case.pairs("counterfactual"), case.pairs("duplicate"))
    graph = state.get("relation_graph") or {}
    n = len(state.get("contexts") or [])
    return {
        "duplicates_collapsed": collapsed,
        "counterfactuals_split": split,
        "relation_calls": int(graph.get("calls", 0)),
        "pairs": int(graph.get("naive_calls", n * (n - 1) // 2)),
        "groups": [sorted(set(g)) for g in groups],
    }


def score(case: MethodCase, name: str, state: dict[str, Any]) -> Row:
    """Score one strategy's final state on a case."""
    answer = top_answer(state)
    decision = state.get("decision")
    decided = None
    if isinstance(decision, dict):
        best = (decision.get("answers") or [{}])[0]
        decided = {
            "strategy": decision.get("strategy"),
            "answer": best.get("answer"),
            "support": best.get("support"),
            "source": decision.get("source"),
            "why": decision.get("why"),
        }
    weights = position_weights(state)
    return Row(
        strategy=name,
        id=case.id,
        answer=answer,
        gold=list(case.gold),
        correct=is_correct(case, answer),
        decision=decided,
        calls=len(state.get("calls") or []),
        overrode=bool((state.get("answer") or {}).get("overrode_decision")),
        moi_position_weights=weights or None,
        corg=corg_measures(case, state) if name == CORG else None,
    )


async def _run_strategy(
    graph: Any,
    ctx: Context,
    cases: list[MethodCase],
    name: str,
    progress: Callable[[str], None],
) -> list[Row]:
    gate = asyncio.Semaphore(CONCURRENCY)
    done = 0

    async def one(case: MethodCase) -> Row:
        nonlocal done
        thread = f"eval-methods-{uuid.uuid4().hex}"
        config = {"configurable": {"thread_id": thread}}
        inputs = {"question": case.question, "qtype": case.qtype, "given": case.given()}
        async with gate:
            try:
                await graph.ainvoke(inputs, config, context=ctx)
                state = dict((await graph.aget_state(config)).values)
                row = score(case, name, state)
            except Exception as exc:  # one failing case is scored wrong, never sinks the run
                first = (str(exc).splitlines() or [""])[0][:300]
                row = Row(name, case.id, "", list(case.gold), False, None, 0)
                row.error = f"{type(exc).__name__}: {first}"
            finally:
                await graph.checkpointer.adelete_thread(thread)
        done += 1
        if done % 10 == 0 or done == len(cases):
            progress(f"{name}: {done}/{len(cases)} questions")
        return row

    return list(await asyncio.gather(*(one(case) for case in cases)))


def summarize(
    cases: list[MethodCase],
    rows: dict[str, list[Row]],
    curve: Callable[[int], list[float]] | None,
) -> dict[str, Any]:
    """Return the report's measures from every strategy's rows."""
    strategies = {}
    for name, got in rows.items():
        right = sum(r.correct for r in got)
        strategies[name] = {
            "accuracy": round(right / len(got), 4) if got else None,
            "ci95": wilson(right, len(got)),
            "llm_calls": round(float(np.mean([r.calls for r in got])), 2) if got else None,
        }
        if errors := [r.error for r in got if r.error is not None]:
            # Failed questions count as wrong; the first error says why.
            strategies[name] |= {"failed": len(errors), "error": errors[0]}
    fits = [w for r in rows.get("moi", []) for w in r.moi_position_weights or []]
    spearman = None
    if curve is not None and fits:
        spearman = round(float(np.mean([curve_spearman(w, curve) for w in fits])), 4)
    measured = [r.corg for r in rows.get(CORG, []) if r.corg is not None]
    collapsed = [c for m in measured for c in m["duplicates_collapsed"]]
    split = [s for m in measured for s in m["counterfactuals_split"]]
    return {
        "strategies": strategies,
        "moi_position_spearman": spearman,
        "corg_counterfactual_split": round(float(np.mean(split)), 4) if split else None,
        "corg_duplicate_collapse": round(float(np.mean(collapsed)), 4) if collapsed else None,
        "corg_relation_calls": _mean([m["relation_calls"] for m in measured]),
        "corg_pairs": _mean([m["pairs"] for m in measured]),
    }


def _mean(values: list[int]) -> float | None:
    return round(float(np.mean(values)), 2) if values else None


async def evaluate_methods(
    settings: Settings,
    cases: list[MethodCase],
    strategies: Sequence[str],
    *,
    embedder: Embedder | None = None,
    curve: Callable[[int], list[float]] | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[dict[str, Any], dict[str, list[Row]]]:
    """Answer every case with every strategy through the phase-B graph; return (report, rows).

    Args:
        settings: The models and every setting (strategies change only their own).
        cases: The cases (graphs/eval/datasets.py).
        strategies: Ensemble strategy names and/or "corg".
        embedder: Shared by every strategy; loaded from settings when None.
        curve: The planted reader's position curve by the number of positions shown (for
            MoI's Spearman); None against real models.
        progress: Called with one line of progress at a time.
    """
    embedder = embedder or BackgroundEmbedder(settings.embeddings)
    graph = build_graph(checkpointer=InMemorySaver(), phase="B")
    rows: dict[str, list[Row]] = {}
    for name in strategies:
        chosen = strategy_settings(settings, name)
        ctx = Context(
            settings=chosen, search=NoSearch(), embedder=embedder, models=ModelPool(chosen)
        )
        started = time.perf_counter()
        rows[name] = await _run_strategy(graph, ctx, cases, name, progress)
        right = sum(r.correct for r in rows[name])
        progress(f"{name}: accuracy {right}/{len(cases)} ({time.perf_counter() - started:.1f} s)")
    return summarize(cases, rows, curve), rows


def write_rows(path: Path, rows: dict[str, list[Row]]) -> None:
    """Write one JSON line per (strategy, case), for audit."""
    with path.open("w", encoding="utf-8") as fh:
        for got in rows.values():
            for row in got:
                fh.write(json.dumps(dataclasses.asdict(row), ensure_ascii=False) + "\n")


def table(report: dict[str, Any]) -> list[str]:
    """Return the report as the lines of a compact text table."""
    reader = report.get("reader") or {}
    shown = ("mode", "curve", "strength", "seed")
    told = ", ".join(f"{k} {reader[k]}" for k in shown if k in reader)
    lines = [
        f"{report['dataset']}: {report['questions']} questions; reader: {told or 'configured'}",
        f"{'strategy':<18}{'accuracy':>9}{'95% CI':>17}{'calls/q':>9}{'failed':>8}",
    ]
    for name, got in report["strategies"].items():
        lo, hi = got["ci95"]
        accuracy = "—" if got["accuracy"] is None else f"{got['accuracy']:.3f}"
        calls = "—" if got["llm_calls"] is None else f"{got['llm_calls']:.1f}"
        interval = f"[{lo:.3f}, {hi:.3f}]"
        lines.append(f"{name:<18}{accuracy:>9}{interval:>17}{calls:>9}{got.get('failed', 0):>8}")
    for key in (
        "moi_position_spearman",
        "corg_counterfactual_split",
        "corg_duplicate_collapse",
        "corg_relation_calls",
        "corg_pairs",
    ):
        value = report.get(key)
        lines.append(f"{key:<26}{'—' if value is None else value}")
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
            evaluate_methods(settings, cases, strategies, embedder=embedder, progress=progress)
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
                embedder=embedder,
                curve=None if planted.curve == "flat" else curve,
                progress=progress,
            )
        )
    return {"reader": served, **head} | report, rows
