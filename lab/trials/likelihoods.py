"""`quorum eval likelihoods`: MoI's model of a real model's likelihoods, and its position curve.

Per question, N passages (the gold, the case's hard distractor, the closest irrelevant ones,
in the case's order) are scored by the configured ensemble model under MoI's 3N random orders
(mixture-of-intervention.txt §3.2.1) and under further random orders held out; the
observation is MoI's own (`ensemble.moi.observation`: log P(passages, question) or
log P(question | passages), the same text MoI scores). The three models of
`likelihood_fits` are fitted on the 3N orders and judged on the held-out ones. Then the
gold passage is moved through positions 0..N−1 among the same distractors and
log P(gold answer | passages, question) is read at each: Lost in the Middle's experiment
(its Figure 1) with the model's likelihood of the answer in place of its accuracy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from infra.models import ChatModel
from lab.trials.datasets import MethodCase, Passage
from lab.trials.likelihood_fits import MODELS, Judged, best, judge, summarize
from nodes.ensemble.strategies.moi import moi_permutations, observation_text
from nodes.ensemble.strategies.moi_fit import moi_solve, orient

SCOPE = (
    "What this measures: whether MoI's position-weights x utilities model (Eq. 4) predicts "
    "this model's own log-likelihoods under unseen orders better than its parts (the gold's "
    "position alone; the passages alone), and how the likelihood of the gold answer moves "
    "with the gold's position. With the default local model (SmolLM2-135M-Instruct) it says "
    "so for a 135M model's likelihoods only: nothing about answer quality, nor about the "
    "models the papers measured."
)
"""What the figures prove and what they do not; printed with every report."""

Progress = Callable[[str], None]


def question_passages(case: MethodCase, n: int) -> tuple[list[Passage], int]:
    """Return the gold and the case's first n−1 other passages in its order, and the gold's index.

    Raises:
        ValueError: The case has no gold passage or fewer than n passages.
    """
    if len(case.passages) < n:
        raise ValueError(f"{case.id}: {len(case.passages)} passages, fewer than {n}")
    golds = [p for p in case.passages if p.role == "gold"]
    if not golds:
        raise ValueError(f"{case.id}: no gold passage")
    others = [p for p in case.passages if p.role != "gold"][: n - 1]
    chosen = [p for p in case.passages if p.role == "gold" or p in others]
    return chosen, chosen.index(golds[0])


def held_out_orders(n: int, count: int, fitting: Sequence[Sequence[int]], seed: int) -> list:
    """Return `count` seeded random full orders of n passages, none among the fitting ones."""
    seen = {tuple(order) for order in fitting}
    rng = np.random.default_rng([seed, 1])
    orders: list[list[int]] = []
    while len(orders) < count:
        order = rng.permutation(n).tolist()
        if tuple(order) not in seen:
            seen.add(tuple(order))
            orders.append(order)
    return orders


def _docs(passages: Sequence[Passage]) -> list[dict[str, Any]]:
    return [{"pmid": p.pmid, "abstract": p.text} for p in passages]


async def observe(model: ChatModel, question: str, shown: Sequence[Passage], joint: bool) -> float:
    """Return MoI's observation of one order (moi.py's text): the joint or the question alone."""
    text = observation_text(_docs(shown), model.context_chars)
    if joint:
        value, _ = await model.loglikelihood("", text + question)
    else:
        value, _ = await model.loglikelihood(text, question)
    return float(value)


async def answer_likelihood(
    model: ChatModel, question: str, shown: Sequence[Passage], answer: str
) -> float:
    """Return log P(answer | passages, question), the answer after an "Answer:" cue."""
    text = observation_text(_docs(shown), model.context_chars) + question + "\nAnswer:"
    value, _ = await model.loglikelihood(text, f" {answer}")
    return float(value)


async def measure_question(
    model: ChatModel, case: MethodCase, n: int, held_out: int, *, joint: bool, seed: int
) -> dict[str, Any]:
    """Score one question's orders and gold positions; fit and judge the three models."""
    shown, gold = question_passages(case, n)
    fitting = moi_permutations(n, "random", seed=seed)
    testing = held_out_orders(n, held_out, fitting, seed)
    scores = await asyncio.gather(
        *(observe(model, case.question, [shown[k] for k in o], joint) for o in fitting + testing)
    )
    train_scores, test_scores = list(scores[: len(fitting)]), list(scores[len(fitting) :])
    judged = judge(fitting, train_scores, testing, test_scores, n, gold, seed=seed)
    # The fit's utilities up to its mirror: oriented the paper's way (primacy), since these
    # passages carry no retriever scores; only `gold_top` depends on it, never the R².
    fit, _ = orient(moi_solve(fitting, train_scores, n, seed=seed), fitting, n, None)
    distractors = [p for k, p in enumerate(shown) if k != gold]
    curve = await asyncio.gather(
        *(
            answer_likelihood(
                model,
                case.question,
                [*distractors[:j], shown[gold], *distractors[j:]],
                case.gold[0],
            )
            for j in range(n)
        )
    )
    return {
        "id": case.id,
        "gold": gold,
        "orders": {"fitting": fitting, "held_out": testing},
        "scores": {"fitting": _rounded(train_scores), "held_out": _rounded(test_scores)},
        "judged": judged,
        "r2": {name: _round(judged.r2(name)) for name in MODELS},
        "weights": [float(a) for a in fit.weights],
        "gold_top": bool(int(np.argmax(fit.utilities)) == gold),
        "spread": float(np.std(scores)),
        "answer_logprob": [float(v) for v in curve],
    }


async def measure(
    model: ChatModel,
    cases: Sequence[MethodCase],
    *,
    passages: int,
    held_out: int,
    joint: bool,
    first: int = 1,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Measure every question with one model; return the report (`report`'s shape).

    The k-th question of the file (from 1; `first` is the first one's) is seeded with k, so
    its orders are the same whatever --offset and --limit picked it.
    """
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for number, case in enumerate(cases, first):
        began = time.perf_counter()
        row = await measure_question(model, case, passages, held_out, joint=joint, seed=number)
        rows.append(row)
        if progress is not None:
            r2 = "  ".join(f"{name} {row['r2'][name]}" for name in MODELS)
            progress(
                f"question {number - first + 1}/{len(cases)} {case.id}: held-out R² {r2} "
                f"({time.perf_counter() - began:.0f} s)"
            )
    return report(model.name, rows, passages, held_out, joint, time.perf_counter() - started)


def report(
    model: str,
    rows: list[dict[str, Any]],
    passages: int,
    held_out: int,
    joint: bool,
    seconds: float,
) -> dict[str, Any]:
    """Return the figures: the fits' held-out R², MoI's mean weights, the gold-position curve."""
    judged: list[Judged] = [row["judged"] for row in rows]
    summary = summarize(judged)
    curve = np.array([row["answer_logprob"] for row in rows])
    weights = np.array([row["weights"] for row in rows])
    calls = len(rows) * (3 * passages + held_out + passages)
    return {
        "model": model,
        "questions": len(rows),
        "passages": passages,
        "observation": "joint" if joint else "question",
        "fitting_orders": 3 * passages,
        "held_out_orders": held_out,
        "fits": summary,
        # A few wild extrapolations can sink a pooled R² that most questions do not share:
        # the median and the count of questions won say how typical the pooled winner is.
        "best_fit": {by: best(summary, by) for by in ("r2_pooled", "r2_median", "best_on")},
        "moi_mean_weights": [_round(a) for a in weights.mean(axis=0)],
        "moi_gold_top_utility": _round(float(np.mean([row["gold_top"] for row in rows]))),
        # Full orders fix the weights only up to a mirror (moi_fit.MoIFit.flipped), which keeps
        # the position that departs most from 1/N: so count that, question by question.
        "moi_most_distinct_position": np.bincount(
            np.argmax(np.abs(weights - 1.0 / passages), axis=1), minlength=passages
        ).tolist(),
        "observation_spread_mean": _round(float(np.mean([row["spread"] for row in rows]))),
        "gold_position_curve": {
            "measure": "log P(gold answer | passages, question), nats",
            "mean": [_round(v) for v in curve.mean(axis=0)],
            "stderr": [_round(v) for v in curve.std(axis=0, ddof=1) / np.sqrt(len(rows))]
            if len(rows) > 1
            else None,
            "best_position": int(np.argmax(curve.mean(axis=0))),
            "minus_position_0": _paired(curve),
        },
        "likelihood_calls": calls,
        "seconds": round(seconds, 1),
        "per_question": [
            {key: row[key] for key in ("id", "r2", "gold", "orders", "scores", "answer_logprob")}
            for row in rows
        ],
    }


def table(result: dict[str, Any]) -> list[str]:
    """Return the report as lines for a terminal."""
    lines = [
        f"{result['model']}: {result['questions']} questions, {result['passages']} passages, "
        f"observation {result['observation']}, {result['fitting_orders']} fitting orders "
        f"(MoI's 3N random), {result['held_out_orders']} held out; "
        f"{result['likelihood_calls']} likelihood calls, {result['seconds']} s",
        "",
        "model          held-out R²: pooled    mean  median  best on  fitting R²",
    ]
    for name in MODELS:
        row = result["fits"][name]
        lines.append(
            f"{name:<14} {_cell(row['r2_pooled']):>19} {_cell(row['r2_mean']):>7} "
            f"{_cell(row['r2_median']):>7} {row['best_on']:>8} "
            f"{_cell(row['r2_fitting_pooled']):>11}"
        )
    lines += [
        "best: " + ", ".join(f"{model} by {by}" for by, model in result["best_fit"].items()),
        f"MoI mean position weights: {result['moi_mean_weights']}",
        "questions whose MoI weight departs most from 1/N at each position (mirror-free): "
        f"{result['moi_most_distinct_position']}",
        f"gold passage has MoI's top utility (primacy orientation): "
        f"{result['moi_gold_top_utility']}",
        "",
        f"gold position  {result['gold_position_curve']['measure']}  (minus position 0, paired)",
    ]
    curve = result["gold_position_curve"]
    count = len(curve["mean"])
    errors = curve["stderr"] or [None] * count
    paired = curve["minus_position_0"] or {"mean": [None] * count, "stderr": [None] * count}
    for position in range(count):
        line = f"{position:>13}  {curve['mean'][position]:>8.3f}"
        if errors[position] is not None:
            line += f" ± {errors[position]:.3f}"
        if position and paired["mean"][position] is not None:
            line += f"   {paired['mean'][position]:+.3f} ± {paired['stderr'][position]:.3f}"
        lines.append(line)
    return lines


def _paired(curve: np.ndarray) -> dict[str, list[float | None]] | None:
    """Return each position's mean paired difference to position 0, and its standard error."""
    if len(curve) < 2:
        return None
    gaps = curve - curve[:, :1]
    return {
        "mean": [_round(v) for v in gaps.mean(axis=0)],
        "stderr": [_round(v) for v in gaps.std(axis=0, ddof=1) / np.sqrt(len(curve))],
    }


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(float(v), 4) for v in values]


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _round(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 4)
