"""Context Bagging (CoBag): views with a relevant core and the rest sampled by relevance."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from infra.embeddings import document_text
from infra.models import ChatModel
from nodes.context import Context
from nodes.ensemble.strategies.registry import Plan, Strategy, every_model, register


def cobag_views(
    relevance: Sequence[float], *, members: int, size: int, core: int, tau: float, seed: int
) -> list[list[int]]:
    """Return one bag of context indices per member: a fixed core plus a softmax sample.

    Every view holds the top-`core` contexts by relevance (ties to the lower index), then
    `size - core` more drawn without replacement with probability ∝ exp(s_i / tau), then
    shuffled. With n <= size every view holds all n contexts, shuffled. One generator seeded
    from `seed` draws for the members in sequence, so views are reproducible.

    Sampling uses the Gumbel-top-k trick: the k largest of s_i / tau + Gumbel noise are
    distributed as k successive softmax draws without replacement, and nothing underflows
    when tau is small. SEE: https://arxiv.org/abs/1903.06059

    Args:
        relevance: Cosine similarity of the question to each context, in rerank order.
        members: Number of views to draw (>= 1).
        size: Contexts per view.
        core: Top contexts present in every view (0 <= core <= size).
        tau: Softmax temperature (> 0); small values favour the most relevant contexts.
        seed: Seed for `np.random.default_rng`.

    Raises:
        ValueError: On invalid arguments or non-finite relevance scores.
    """
    if members < 1:
        raise ValueError(f"members must be >= 1, got {members}")
    if not 0 <= core <= size:
        raise ValueError(f"need 0 <= core <= size, got core={core}, size={size}")
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    scores = np.asarray(relevance, dtype=float)
    if not np.all(np.isfinite(scores)):
        raise ValueError("relevance scores must be finite")
    n = len(scores)
    rng = np.random.default_rng(seed)
    if n <= size:
        return [rng.permutation(n).tolist() for _ in range(members)]
    ranked = sorted(range(n), key=lambda i: (-scores[i], i))
    fixed, rest = ranked[:core], np.array(sorted(ranked[core:]))
    logits = scores[rest] / tau
    views = []
    for _ in range(members):
        keys = logits + rng.gumbel(size=len(rest))
        drawn = rest[np.argsort(-keys, kind="stable")[: size - core]]
        view = np.array(fixed + drawn.tolist())
        views.append(view[rng.permutation(len(view))].tolist())
    return views


def mean_relevance(view: Sequence[int], relevance: Sequence[float]) -> float:
    """Return the mean relevance of a view's contexts (-inf for an empty view, so it never wins)."""
    if not view:
        return float("-inf")
    return float(np.mean([relevance[i] for i in view]))


@register("cobag")
class CoBag(Strategy):
    """Bagged views weighted by their relevance: a tie goes to the most relevant view."""

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[dict[str, Any]],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return the bags, answered greedily, with each context's relevance for the trace."""
        bag = ctx.settings.ensemble.cobag
        relevance = await _relevance(ctx, question, contexts)
        orders = cobag_views(
            relevance,
            members=bag.members,
            size=bag.contexts,
            core=min(bag.core, bag.contexts),
            tau=bag.tau,
            seed=seed % 2**32,
        )
        return Plan(
            every_model(models, orders, 0.0),
            contexts,
            weights=[mean_relevance(o, relevance) for o in orders],
            diagnostics={
                "relevance": {
                    c["pmid"]: round(float(r), 4) for c, r in zip(contexts, relevance, strict=True)
                }
            },
        )


async def _relevance(ctx: Context, question: str, contexts: list[dict[str, Any]]) -> np.ndarray:
    """Return cosine(question, context) per context from the embedder."""

    def compute() -> np.ndarray:
        query = ctx.embedder.embed_query(question)
        docs = ctx.embedder.embed_documents(
            [document_text(c.get("title", ""), c.get("abstract", "")) for c in contexts]
        )
        return docs @ query

    return await asyncio.to_thread(compute)
