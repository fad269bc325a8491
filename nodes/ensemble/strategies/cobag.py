"""Context Bagging (CoBag): views with a relevant core and the rest sampled by relevance."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infra.embeddings import document_text
from infra.models import ChatModel
from nodes.context import Context
from nodes.ensemble.decide import majority_decision
from nodes.ensemble.strategies.registry import (
    Plan,
    Strategy,
    StrategySettings,
    every_model,
    register,
)
from nodes.state import Decision, Member, Passage, Votes


def cobag_views(
    relevance: Sequence[float],
    *,
    members: int,
    size: int,
    core: int,
    tau: float,
    seed: int,
    shuffle: bool = True,
    sampling: str = "relevance",
) -> list[list[int]]:
    """Return one bag of context indices per member: a fixed core plus a softmax sample.

    Every view holds the top-`core` contexts by relevance (ties to the lower index), then
    `size - core` more drawn without replacement with probability ∝ exp(s_i / tau), then
    shuffled. With n <= size every view holds all n contexts, shuffled. One generator seeded
    from `seed` draws for the members in sequence, so views are reproducible.

    The paper's ablations (context-bagging.txt §4.3, Table 2) remove one mechanism each:
    `shuffle=False` (CoBag-NoShuffle) keeps each view in rank order (ascending index, the
    order the contexts came in); `sampling="uniform"` (CoBag-Uniform) draws the non-core
    contexts with equal probability. Both consume the generator exactly as the method does,
    so NoShuffle's views hold the same contexts as CoBag's, only never reordered.

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
        shuffle: Shuffle each view (step 3); False keeps the rank order.
        sampling: "relevance" (∝ exp(s/τ), step 2) or "uniform".

    Raises:
        ValueError: On invalid arguments or non-finite relevance scores.
    """
    if members < 1:
        raise ValueError(f"members must be >= 1, got {members}")
    if not 0 <= core <= size:
        raise ValueError(f"need 0 <= core <= size, got core={core}, size={size}")
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if sampling not in ("relevance", "uniform"):
        raise ValueError(f"sampling must be 'relevance' or 'uniform', got {sampling!r}")
    scores = np.asarray(relevance, dtype=float)
    if not np.all(np.isfinite(scores)):
        raise ValueError("relevance scores must be finite")
    n = len(scores)
    rng = np.random.default_rng(seed)

    def arrange(view: np.ndarray) -> list[int]:
        shuffled = view[rng.permutation(len(view))].tolist()  # drawn either way (see above)
        return shuffled if shuffle else sorted(shuffled)

    if n <= size:
        return [arrange(np.arange(n)) for _ in range(members)]
    ranked = sorted(range(n), key=lambda i: (-scores[i], i))
    fixed, rest = ranked[:core], np.array(sorted(ranked[core:]))
    logits = scores[rest] / tau if sampling == "relevance" else np.zeros(len(rest))
    views = []
    for _ in range(members):
        keys = logits + rng.gumbel(size=len(rest))
        drawn = rest[np.argsort(-keys, kind="stable")[: size - core]]
        views.append(arrange(np.array(fixed + drawn.tolist())))
    return views


def mean_relevance(view: Sequence[int], relevance: Sequence[float]) -> float:
    """Return the mean relevance of a view's contexts (-inf for an empty view, so it never wins)."""
    if not view:
        return float("-inf")
    return float(np.mean([relevance[i] for i in view]))


@dataclass(frozen=True, kw_only=True)
class CobagSettings(StrategySettings):
    """CoBag's settings beside every strategy's."""

    core: int
    """Passages every bag shares (cobag.core, at most m)."""
    tau: float
    """cobag.tau: the relevance sampling's temperature."""
    shuffle: bool
    """cobag.shuffle: whether a bag's order is shuffled (False: the NoShuffle ablation)."""
    sampling: str
    """cobag.sampling: "relevance", or "uniform" (the Uniform ablation)."""
    pool: int
    """cobag.pool: the passages bags are drawn from."""
    pool_available: int
    """The passages the pool held for this question."""
    tie_break: str
    """How equal votes are broken."""


@register("cobag")
class CoBag(Strategy):
    """Bagged views from a pool larger than m; equal votes go to the most relevant view.

    context-bagging.txt §3.3: relevance by embedding cosine (step 1), a top-r core plus
    m - r drawn ∝ exp(s/τ) (step 2), shuffled (step 3), greedy answers and a majority vote
    over normalized answers, ties to the view of highest mean relevance (step 4).
    """

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return the bags drawn from the pool, answered greedily, with each one's relevance."""
        bag = ctx.settings.ensemble.cobag
        pool = contexts[: bag.pool]
        relevance = await _relevance(ctx, question, pool)
        core = min(bag.core, bag.contexts)
        orders = cobag_views(
            relevance,
            members=bag.members,
            size=bag.contexts,
            core=core,
            tau=bag.tau,
            seed=seed % 2**32,
            shuffle=bag.shuffle,
            sampling=bag.sampling,
        )
        settings = CobagSettings.of(
            ctx,
            models,
            members=bag.members,
            contexts=bag.contexts,
            core=core,
            tau=bag.tau,
            shuffle=bag.shuffle,
            sampling=bag.sampling,
            pool=bag.pool,
            pool_available=len(pool),
            temperature=0.0,
            tie_break="mean relevance of the view",
        )
        notes = []
        if not bag.shuffle or bag.sampling == "uniform":
            ablation = "NoShuffle" if not bag.shuffle else "Uniform"
            if not bag.shuffle and bag.sampling == "uniform":
                ablation = "NoShuffle + Uniform"
            notes.append(
                f"cobag: CoBag-{ablation}, the paper's ablation (Table 2): a control with a "
                "mechanism removed, not the method"
            )
        if len(pool) <= bag.contexts:
            # Every view then holds the whole pool: CoBag is permute_vote with K bags, and the
            # relevance tie-break cannot act (every view has the same mean relevance).
            notes.append(
                f"cobag: a pool of {len(pool)} context(s) is no larger than m = {bag.contexts} "
                f"(cobag.pool = {bag.pool}; rerank.contexts or organize passed fewer): every "
                f"view shows all of them, {'shuffled' if bag.shuffle else 'in rank order'}"
            )
        shown = {i for order in orders for i in order}
        # The evidence synthesis reads: what the members saw, most relevant first, m of it.
        order = sorted(shown, key=lambda i: (-relevance[i], i))[: bag.contexts]
        return Plan(
            every_model(models, orders, 0.0),
            pool,
            settings,
            weights=[mean_relevance(o, relevance) for o in orders],
            order=order,
            diagnostics={
                "relevance": {
                    c["pmid"]: round(float(r), 4) for c, r in zip(pool, relevance, strict=True)
                }
            },
            notes=notes,
        )

    def decide(self, qtype: str, members: list[Member], plan: Plan, votes: Votes) -> Decision:
        """Return the majority over the bags; equal votes go to the most relevant view."""
        return majority_decision(
            self.name,
            qtype,
            members,
            plan,
            votes,
            how=f"majority vote over {len(plan.views)} bagged view(s)",
            tie="the mean relevance of the most relevant view naming it",
        )


async def _relevance(ctx: Context, question: str, contexts: list[Passage]) -> np.ndarray:
    """Return cosine(question, context) per context from the embedder."""

    def compute() -> np.ndarray:
        query = ctx.embedder.embed_query(question)
        docs = ctx.embedder.embed_documents(
            [document_text(c.get("title", ""), c.get("abstract", "")) for c in contexts]
        )
        return docs @ query

    return await asyncio.to_thread(compute)
