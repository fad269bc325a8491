"""Mixture-of-Intervention (MoI): passage utilities and position bias from several orders.

mixture-of-intervention.txt: each model scores the top-N under several orders (§3.2), the
fit separates position bias from passage utility (§3.1, `moi_fit`), and the model answers
once, greedily, from the debiased order, which is also the order synthesis reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from typing_extensions import override

from infra.models import ChatModel, LikelihoodUnavailable, provider_for
from infra.settings import Settings
from nodes.context import Context
from nodes.ensemble.decide import majority_decision
from nodes.ensemble.strategies.moi_fit import MoIFit, moi_flat, moi_solve, orient
from nodes.ensemble.strategies.moi_orders import moi_permutations
from nodes.ensemble.strategies.registry import (
    Plan,
    Strategy,
    StrategySettings,
    StrategyUnavailable,
    View,
    register,
)
from nodes.passages import passages
from nodes.state import Call, Decision, Member, Passage, Votes
from nodes.state import MoiFit as FitRecord

__all__ = ["MoI", "MoIFit", "moi_permutations", "moi_solve", "observation_text"]


def observation_text(docs: list[Passage], chars: int) -> str:
    """Return the prompt text an order is scored on: its passages, then the question marker."""
    return passages(docs, chars) + "\n\nQuestion: "


@dataclass(frozen=True, kw_only=True)
class MoiSettings(StrategySettings):
    """MoI's settings beside every strategy's."""

    permutations: str
    """moi.permutations: how the observed orders are drawn."""
    observed_orders: int
    """The orders whose likelihood was observed."""
    observation: str
    """moi.observation: what the likelihood is of ("joint" or "question")."""
    order: str
    """moi.order: how the debiased order is read from the fit."""
    weights: str
    """moi.weights: "fitted" (the method) or "flat" (its control)."""
    prefix_length: int | None = None
    """moi.prefix_length, for prefix and variable permutations."""
    prefix_lengths: tuple[int, ...] | None = None
    """The length of each observed order, for prefix and variable permutations."""
    dropped: Mapping[str, str] | None = None
    """The models whose likelihood calls failed, and why (they were dropped, not the question)."""


@register("moi")
class MoI(Strategy):
    """Each model's likelihoods under several orders debias the order; one answer per model."""

    @override
    def refusal(self, settings: Settings) -> str | None:
        for spec in settings.models.for_role("ensemble"):
            if (why := provider_for(spec).likelihood_problem(spec)) is not None:
                return f"ensemble.strategy 'moi' needs prompt log-probabilities: {why}"
        return None

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Observe each order's likelihood, fit, and answer from the debiased order."""
        settings = ctx.settings.ensemble
        moi = settings.moi
        top = contexts[: settings.contexts]
        # The retriever's scores: the prior the paper leans on (reference order, pruning),
        # here also what orients a fit that full orders leave mirror-symmetric.
        scores = [float(c.get("score") or 0.0) for c in top]
        perms = moi_permutations(
            len(top),
            moi.permutations,
            prefix_length=moi.prefix_length,
            seed=seed % 2**32,
            scores=scores,
        )
        joint = moi.observation == "joint"
        calls: list[Call] = []

        async def observe(model: ChatModel) -> list[float]:
            docs = [[top[i] for i in perm] for perm in perms]
            return list(
                await asyncio.gather(
                    *(_observe(model, question, shown, calls, joint=joint) for shown in docs)
                )
            )

        results = await asyncio.gather(
            *(observe(model) for model in models), return_exceptions=True
        )
        # A model whose likelihood calls fail (a timeout, a 5xx, an endpoint whose echoed
        # log-probabilities the probe refused) is dropped, never the question.
        dropped = {
            model.name: f"{type(result).__name__}: {result}"[:300]
            for model, result in zip(models, results, strict=True)
            if isinstance(result, BaseException)
        }
        kept = [
            (model, result)
            for model, result in zip(models, results, strict=True)
            if not isinstance(result, BaseException)
        ]
        if not kept:
            refused = [r for r in results if isinstance(r, LikelihoodUnavailable)]
            if len(refused) == len(results):  # the server's own reason, said once
                raise StrategyUnavailable(f"ensemble strategy 'moi': {refused[0]}")
            raise StrategyUnavailable(
                f"ensemble strategy 'moi': every model's likelihood calls failed ({dropped})"
            )
        models = [model for model, _ in kept]
        observed = [result for _, result in kept]
        fits: dict[str, FitRecord] = {}
        views: list[View] = []
        for number, (model, observations) in enumerate(zip(models, observed, strict=True)):
            if moi.weights == "flat":  # the control: no position weights to fit or orient
                fit, orientation = moi_flat(perms, observations, len(top)), "flat weights"
            else:
                fit = moi_solve(perms, observations, len(top), seed=seed % 2**32)
                fit, orientation = orient(fit, perms, len(top), scores)
            order = fit.order(moi.order)
            views.append(View(model, number, order, 0.0))
            fits[f"{number}:{model.name}"] = {
                "observations": [round(float(o), 4) for o in observations],
                "permutations": [[top[i]["pmid"] for i in p] for p in perms],
                "position_weights": [round(float(a), 4) for a in fit.weights],
                "utilities": {
                    top[i]["pmid"]: round(float(u), 4) for i, u in enumerate(fit.utilities)
                },
                "order": [top[i]["pmid"] for i in order],
                "residual": round(float(fit.residual), 6),
                "orientation": orientation,
            }
        prefixed = moi.permutations in ("prefix", "variable")
        recorded = MoiSettings.of(
            ctx,
            models,
            members=1,  # one greedy answer per model, from its debiased order
            contexts=settings.contexts,
            permutations=moi.permutations,
            observed_orders=len(perms),
            observation=moi.observation,
            order=moi.order,
            weights=moi.weights,
            temperature=0.0,
            prefix_length=moi.prefix_length if prefixed else None,
            prefix_lengths=tuple(len(p) for p in perms) if prefixed else None,
            dropped=dropped or None,
        )
        notes = []
        if moi.weights == "flat":
            notes.append(
                "moi: flat position weights, utilities are plain mean likelihoods: MoI's "
                "control with its position debiasing removed, not the method"
            )
        return Plan(
            views,
            top,
            recorded,
            order=views[0].order if views else None,
            calls=calls,
            diagnostics={"moi": fits},
            notes=notes,
        )

    def decide(self, qtype: str, members: list[Member], plan: Plan, votes: Votes) -> Decision:
        """Return the answers given from the debiased order; that order is the evidence order."""
        return majority_decision(
            self.name,
            qtype,
            members,
            plan,
            votes,
            how="one greedy answer per model from its MoI-debiased order",
        )


async def _observe(
    model: ChatModel,
    question: str,
    docs: list[Passage],
    calls: list[Call],
    *,
    joint: bool,
) -> float:
    """Return one order's observation: log s = log P(q | π) + log P(π) (Eq. 3), or the first."""
    text = observation_text(docs, model.context_chars)
    started, wall = time.perf_counter(), time.time()
    if joint:  # the passages' own likelihood in this order is the paper's P(π) term
        value, tokens = await model.loglikelihood("", text + question)
    else:
        value, tokens = await model.loglikelihood(text, question)
    calls.append(
        {
            "node": "ensemble",
            "kind": "loglikelihood",
            "model": model.name,
            "started": round(wall, 4),
            "latency_s": round(time.perf_counter() - started, 3),
            "input_tokens": tokens,
            "output_tokens": 0,
            "raw": "",
            "error": None,
        }
    )
    return float(np.float64(value))
