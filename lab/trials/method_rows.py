"""How one run's final state on a case is scored by `quorum eval methods`, as one row.

The answer scored is the graph's final exact answer (its first candidate). Beside it: the
decision that led there, the LLM calls, whether a gold answer was among all the answers
surfaced (answer recall, CORG's "Ans"), MoI's recovered position weights, and for CORG the
fate of the planted pairs and whether it answered plurally or surely.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import spearmanr

from lab.trials.controls import CORG, Arm
from lab.trials.datasets import MethodCase, is_correct
from lab.trials.organize_measures import (
    answered_confidently,
    answered_plurally_or_below_gate,
    pair_outcomes,
)


@dataclass
class Row:
    """One run's answer to one case, as written to --rows."""

    strategy: str
    """The run: a strategy, 'method/control' or 'method/ablation/...' (lab/eval/controls.py)."""
    id: str
    answer: str
    gold: list[str]
    correct: bool
    decision: dict[str, Any] | None
    calls: int
    overrode: bool = False
    recalled: bool = False
    """A gold answer is among the answers the decision surfaced or the final candidates."""
    error: str | None = None
    moi_position_weights: list[list[float]] | None = None
    corg: dict[str, Any] | None = None


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
    """Return how CORG handled a case's planted pairs, its calls and pairs, and how it answered."""
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
        "conflict": bool(case.pairs("counterfactual")),
        "plural_or_below_gate": answered_plurally_or_below_gate(state),
        "confident": answered_confidently(state),
    }


def _decided_answers(state: dict[str, Any]) -> list[str]:
    decision = state.get("decision") or {}
    return [str(a.get("answer")) for a in decision.get("answers") or [] if a.get("answer")]


def recalled(case: MethodCase, state: dict[str, Any]) -> bool:
    """Tell whether a gold answer is among the decision's answers or the final candidates."""
    exact = (state.get("answer") or {}).get("exact") or []
    flat: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            flat.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(exact)
    return any(is_correct(case, a) for a in [*flat, *_decided_answers(state)])


def score(case: MethodCase, arm: Arm, state: dict[str, Any]) -> Row:
    """Score one run's final state on a case."""
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
            # The K and m the strategy ran with, as it recorded them.
            "members": (decision.get("settings") or {}).get("members"),
            "contexts": (decision.get("settings") or {}).get("contexts"),
        }
    weights = position_weights(state)
    return Row(
        strategy=arm.label,
        id=case.id,
        answer=answer,
        gold=list(case.gold),
        correct=is_correct(case, answer),
        decision=decided,
        calls=len(state.get("calls") or []),
        overrode=bool((state.get("answer") or {}).get("overrode_decision")),
        recalled=recalled(case, state),
        moi_position_weights=weights or None,
        corg=corg_measures(case, state) if arm.method == CORG else None,
    )
