"""CORG's baselines that group without relations: base, separate, random, kmeans.

SEE: Lee et al., "Generating Answers from Complex, Interrelated Contexts" (§5.2, App. D.2).
base: all in one group, one call; separate: one group each; random: a random partition into
`organize.groups` groups (seeded by organize.seed and the question); kmeans: k-means over the
contexts' vectors with that many clusters. random and kmeans answer their groups as CORG's
aggregator does (plural question for a group of several), so they differ from CORG only in how
they group; base asks the question as it stands (Table 11: "without all [R, A]" scores exactly
Base).
"""

from __future__ import annotations

import asyncio
import random
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from infra.embeddings import document_text
from infra.models import ChatModel
from nodes.context import Context
from nodes.organize.answers import answer_groups
from nodes.organize.strategies.registry import OrganizeStrategy, register
from nodes.seeds import question_seed
from nodes.state import Call, Organized, Passage


class Ablation(OrganizeStrategy):
    """Group without relation calls and answer each group."""

    forms_groups = True
    needs_vectors: ClassVar[bool] = False
    reformulate: ClassVar[bool] = True
    """Whether a group of several is asked in plural form, as CORG's aggregator asks it."""
    seeded: ClassVar[bool] = False
    """Whether organize.groups and organize.seed shape the groups."""

    def groups(
        self, n: int, *, groups: int, seed: int = 0, vectors: np.ndarray | None = None
    ) -> list[list[int]]:
        """Return groups of the indices of n contexts, each in rank order."""
        if n == 0:
            return []
        return self.partition(n, max(1, min(groups, n)), seed=seed, vectors=vectors)

    @abstractmethod
    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Return the groups of n >= 1 contexts, aiming at k of them."""
        ...

    def settings(self, ctx: Context, model: ChatModel) -> dict[str, Any]:
        """Return the baseline's settings: grouping, reformulation, each prompt's budget."""
        chosen = super().settings(ctx, model) | {
            "context_chars": model.context_chars,
            "max_concurrency": ctx.settings.ensemble.max_concurrency,
            "temperature": 0.0,
            "reformulate": self.reformulate,
        }
        if self.seeded:
            chosen |= {"groups": ctx.settings.organize.groups, "seed": ctx.settings.organize.seed}
        return chosen

    async def organize(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        model: ChatModel,
        qtype: str,
    ) -> Organized:
        """Return every context, the groups' answers, and no relations."""
        settings = ctx.settings.organize
        vectors = None
        if self.needs_vectors:
            vectors = await asyncio.to_thread(
                ctx.embedder.embed_documents,
                [document_text(c.get("title", ""), c.get("abstract", "")) for c in contexts],
            )
        grouped = self.groups(
            len(contexts),
            groups=settings.groups,
            # Per question: one seed for all would deal every question's retriever-ordered
            # contexts into the same pattern, a systematic grouping rather than a random one.
            seed=question_seed(settings.seed, question) % 2**32,
            vectors=vectors,
        )
        calls: list[Call] = []
        answered = await answer_groups(
            model,
            question,
            qtype,
            [[contexts[i] for i in g] for g in grouped],
            calls,
            max_concurrency=ctx.settings.ensemble.max_concurrency,
            top_k=settings.top_k,
            reformulate=self.reformulate,
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
    """All contexts in one group, asked as the question stands."""

    reformulate = False

    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Return one group of all n."""
        return [list(range(n))]


@register("separate")
class Separate(Ablation):
    """One group per context."""

    reformulate = False  # a group of one is never asked in plural form

    def partition(
        self, n: int, k: int, *, seed: int, vectors: np.ndarray | None
    ) -> list[list[int]]:
        """Return n groups of one."""
        return [[i] for i in range(n)]


@register("random")
class RandomGroups(Ablation):
    """A seeded random partition into k groups."""

    seeded = True

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
    seeded = True

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
