"""CORG relation graph: label every pair of contexts, asking a model as few times as possible.

SEE: Lee et al., "Generating Answers from Complex, Interrelated Contexts" (Algorithm 1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

Relation = Literal["duplicated", "counterfactual", "distracting", "ambiguous", "none"]
RELATIONS: frozenset[str] = frozenset(get_args(Relation))
Source = Literal["asked", "mirrored", "failed"]


class Triple(BaseModel):
    """What one context says in answer to the question."""

    answer: str = Field(
        description="The context's answer to the question, in a few words", max_length=100
    )
    entity: str = Field(
        description="The entity the question asks about, as the context names it", max_length=80
    )
    descriptor: str = Field(
        description=(
            "What distinguishes the context's reading of the entity (a population, time, "
            "condition or sense); empty if the context gives none"
        ),
        max_length=100,
    )


class PairRelation(BaseModel):
    """The triples of two contexts and how the contexts relate."""

    first: Triple = Field(description="The triple extracted from the first context")
    second: Triple = Field(description="The triple extracted from the second context")
    label: Relation = Field(
        description=(
            "duplicated: same descriptor, same answer; counterfactual: same descriptor, "
            "different answer; distracting: different descriptors, neither empty; ambiguous: "
            "one descriptor empty, same answer; none: one descriptor empty, different answer "
            "or unrelated"
        )
    )


@dataclass(frozen=True, kw_only=True)
class Edge:
    """The relation between contexts a < b, and how it was obtained."""

    a: int
    b: int
    label: Relation
    source: Source
    via: int | None = None
    """The anchor a mirrored edge was inferred through."""
    error: str | None = None
    """Why the relate call failed, for source "failed"."""


@dataclass(kw_only=True)
class RelationGraph:
    """Labelled pairs of n contexts (index order = rerank order)."""

    n: int
    edges: dict[tuple[int, int], Edge] = field(default_factory=dict)
    asked: list[tuple[int, int]] = field(default_factory=list)
    """Pairs a model was asked about, in the order asked."""
    rounds: list[int] = field(default_factory=list)
    """Anchors, in the order they were taken."""

    @property
    def calls(self) -> int:
        """Return the number of relate calls made."""
        return len(self.asked)

    @property
    def naive_calls(self) -> int:
        """Return the number of calls asking every pair would make."""
        return self.n * (self.n - 1) // 2

    def edge(self, i: int, j: int) -> Edge | None:
        """Return the edge between i and j in either order, if known."""
        return self.edges.get((min(i, j), max(i, j)))

    def label(self, i: int, j: int) -> Relation | None:
        """Return the relation between i and j in either order, if known."""
        edge = self.edge(i, j)
        return edge.label if edge else None

    def neighbours(self, i: int, label: Relation) -> list[int]:
        """Return the contexts related to i by label, in rank order."""
        return [j for j in range(self.n) if j != i and self.label(i, j) == label]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able summary for traces."""
        return {
            "n": self.n,
            "calls": self.calls,
            "naive_calls": self.naive_calls,
            "rounds": list(self.rounds),
            "edges": [
                {
                    "pair": [e.a, e.b],
                    "label": e.label,
                    "source": e.source,
                    "mirrored": e.source == "mirrored",
                    "via": e.via,
                    **({"error": e.error} if e.error else {}),
                }
                for _, e in sorted(self.edges.items())
            ],
        }


def _missing(graph: RelationGraph, i: int) -> list[int]:
    return [j for j in range(graph.n) if j != i and graph.edge(i, j) is None]


def _mirror(graph: RelationGraph, anchor: int) -> None:
    """Infer edges of the anchor's duplicates and counterfactuals from the anchor's own edges.

    Algorithm 1 copies a duplicate's or a counterfactual's relations from the anchor's
    wholesale. Only what the definitions guarantee is copied here: two contexts that both
    contradict the anchor may agree with each other, so that pair is asked in a later round
    (test_mirrored_labels_match_a_consistent_oracle holds every copied label to the truth).
    """
    # A failed call says nothing about the pair, so it is never copied.
    known = {
        c: e.label
        for c in range(graph.n)
        if c != anchor and (e := graph.edge(anchor, c)) is not None and e.source != "failed"
    }
    for b, relation in known.items():
        if relation not in ("duplicated", "counterfactual"):
            continue
        for c, label in known.items():
            if c == b or graph.edge(b, c) is not None:
                continue
            if relation == "duplicated":
                inferred: Relation | None = label
            elif label == "duplicated":
                inferred = "counterfactual"
            elif label == "distracting":
                inferred = "distracting"
            else:
                inferred = None
            if inferred is not None:
                pair = (min(b, c), max(b, c))
                graph.edges[pair] = Edge(
                    a=pair[0], b=pair[1], label=inferred, source="mirrored", via=anchor
                )


async def build_relation_graph(
    n: int,
    relate: Callable[[int, int], Awaitable[Relation]],
    *,
    max_concurrency: int,
) -> RelationGraph:
    """Label every pair of n contexts, relating one anchor at a time and mirroring the rest.

    Args:
        n: Number of contexts; index order is rerank order.
        relate: Labels contexts (i, j), i < j; an exception marks the pair "none", "failed".
        max_concurrency: Most relate calls in flight at once.
    """
    if n < 0 or max_concurrency < 1:
        raise ValueError(f"need n >= 0 and max_concurrency >= 1, got {n}, {max_concurrency}")
    graph = RelationGraph(n=n)
    semaphore = asyncio.Semaphore(max_concurrency)

    async def ask(pair: tuple[int, int]) -> Edge:
        async with semaphore:
            try:
                label = await relate(*pair)
                if label not in RELATIONS:
                    raise ValueError(f"unknown relation {label!r}")
            except Exception as exc:  # one bad call must not sink the question
                return Edge(
                    a=pair[0], b=pair[1], label="none", source="failed", error=repr(exc)[:300]
                )
        return Edge(a=pair[0], b=pair[1], label=label, source="asked")

    while (anchor := next((i for i in range(n) if _missing(graph, i)), None)) is not None:
        graph.rounds.append(anchor)
        pairs = [(min(anchor, c), max(anchor, c)) for c in _missing(graph, anchor)]
        graph.asked.extend(pairs)
        for edge in await asyncio.gather(*(ask(p) for p in pairs)):
            graph.edges[(edge.a, edge.b)] = edge
        _mirror(graph, anchor)
    return graph
