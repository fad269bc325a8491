"""CORG's ablations: base, separate, random, kmeans group without relations, then answer alike.

base: all in one group; separate: one group each; random: a seeded random partition into
`organize.groups` groups; kmeans: k-means over the contexts' vectors with that many clusters.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

import numpy as np

from infra.embeddings import document_text
from infra.models import ChatModel
from nodes.context import Context
from nodes.organize.answers import answer_groups
from nodes.organize.strategies.registry import OrganizeStrategy, register


class Ablation(OrganizeStrategy):
    """Group without relation calls and answer each group the way CORG does."""

    needs_vectors: ClassVar[bool] = False

    def groups(
        self, n: int, *, groups: int, seed: int = 0, vectors: np.ndarray | None = None
    ) -> list[list[int]]:
        """Return groups of the indices of n contexts, each in rank order."""
        if n == 0:
            return []
        return self.partition(n, max(1, min(groups, n)), seed=seed, vectors=vectors)

    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Return the groups of n >= 1 contexts, aiming at k of them."""
        raise NotImplementedError

    async def organize(
        self, ctx: Context, question: str, contexts: list[dict[str, Any]], model: ChatModel
    ) -> dict[str, Any]:
        """Return every context, the groups' answers, and no relations."""
        settings = ctx.settings.organize
        vectors = None
        if self.needs_vectors:
            vectors = ctx.embedder.embed_documents(
                [document_text(c.get("title", ""), c.get("abstract", "")) for c in contexts]
            )
        grouped = self.groups(
            len(contexts), groups=settings.groups, seed=settings.seed, vectors=vectors
        )
        calls: list[dict[str, Any]] = []
        answered = await answer_groups(
            model,
            question,
            [[contexts[i] for i in g] for g in grouped],
            calls,
            max_concurrency=ctx.settings.ensemble.max_concurrency,
        )
        return {
            "organized": contexts,
            "relations": [],
            "groups": answered,
            "calls": calls,
            "notes": [
                f"organize: {self.name} grouping, {len(grouped)} group(s), no relation calls"
            ],
        }


@register("base")
class OneGroup(Ablation):
    """All contexts in one group."""

    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Return one group of all n."""
        return [list(range(n))]


@register("separate")
class Separate(Ablation):
    """One group per context."""

    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Return n groups of one."""
        return [[i] for i in range(n)]


@register("random")
class RandomGroups(Ablation):
    """A seeded random partition into k groups."""

    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Deal a seeded shuffle of the contexts into k groups."""
        order = list(range(n))
        random.Random(seed).shuffle(order)
        return _by_label({index: position % k for position, index in enumerate(order)}, n)


@register("kmeans")
class KMeansGroups(Ablation):
    """k-means over the contexts' vectors."""

    needs_vectors = True

    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Cluster the contexts' vectors into k groups."""
        if vectors is None:
            raise ValueError("kmeans grouping needs the contexts' vectors")
        from sklearn.cluster import KMeans

        labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(vectors)
        return _by_label(dict(enumerate(labels)), n)


def _by_label(labels: dict[int, Any], n: int) -> list[list[int]]:
    """Return the groups of equal labels, each in rank order, ordered by their first member."""
    out: dict[int, list[int]] = {}
    for index in range(n):
        out.setdefault(int(labels[index]), []).append(index)
    return [out[key] for key in sorted(out, key=lambda key: out[key][0])]
