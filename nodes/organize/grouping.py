"""CORG's reranker: drop redundant contexts and split conflicting ones into separate groups.

SEE: Lee et al., "Generating Answers from Complex, Interrelated Contexts" (§4, Reranker).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodes.organize.relations import RelationGraph


@dataclass(kw_only=True)
class Grouping:
    """Groups of context indices to answer from, and what was left out and why."""

    groups: list[list[int]]
    """Context indices per group, each in rank order."""
    dropped: dict[int, str] = field(default_factory=dict)
    """Index → reason, e.g. "duplicate of 3" or "ambiguous with 2"."""
    into: dict[int, int] = field(default_factory=dict)
    """Index dropped → the index it was dropped in favour of (which says the same)."""
    not_organized: list[int] = field(default_factory=list)
    """Indices past top_k, left out of the groups."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able summary for traces."""
        return {
            "groups": [list(g) for g in self.groups],
            "dropped": [{"index": i, "reason": r} for i, r in sorted(self.dropped.items())],
            "not_organized": list(self.not_organized),
        }

    def homes(self) -> dict[int, int]:
        """Return each dropped index → the kept index it was dropped in favour of, at last."""
        home: dict[int, int] = {}
        for i in self.into:
            target = i
            # An ambiguous twin may point at a context later dropped as a duplicate.
            while target in self.into:
                target = self.into[target]
            home[i] = target
        return home

    def covers(self) -> list[list[int]]:
        """Return per group its indices and those dropped in their favour, in rank order."""
        home = self.homes()
        return [sorted([*g, *(i for i, t in home.items() if t in g)]) for g in self.groups]

    def sides(self, graph: RelationGraph) -> list[list[int]]:
        """Return per group its counterfactual side: its contexts contradicting a kept one.

        What carries a group's answer when it cites nothing (aggregate.supported_by): the
        contexts dealt in to even the groups never do.
        """
        kept = {i for g in self.groups for i in g}
        return [
            [i for i in g if any(j in kept for j in graph.neighbours(i, "counterfactual"))]
            for g in self.groups
        ]


def _described(descriptors: dict[int, str] | None, i: int) -> bool | None:
    """Return whether context i has a descriptor, or None if unknown."""
    if descriptors is None or i not in descriptors:
        return None
    return bool((descriptors[i] or "").strip())


def _drop_ambiguous(
    graph: RelationGraph, kept: list[int], descriptors: dict[int, str] | None
) -> dict[int, tuple[int, str]]:
    dropped: dict[int, tuple[int, str]] = {}
    for x, i in enumerate(kept):
        for j in kept[x + 1 :]:
            if i in dropped or j in dropped or graph.label(i, j) != "ambiguous":
                continue
            has_i, has_j = _described(descriptors, i), _described(descriptors, j)
            # The described member says more than its descriptor-less twin; when descriptors
            # do not tell them apart, the better-ranked one stays.
            if has_i is False and has_j is True:
                dropped[i] = (j, f"ambiguous with {j}")
            else:
                dropped[j] = (i, f"ambiguous with {i}")
    return dropped


def _collapse_duplicates(graph: RelationGraph, kept: list[int]) -> dict[int, tuple[int, str]]:
    parent = {i: i for i in kept}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for x, i in enumerate(kept):
        for j in kept[x + 1 :]:
            if graph.label(i, j) == "duplicated":
                ri, rj = root(i), root(j)
                # The paper keeps a random one and finds the choice makes no notable difference;
                # the best-ranked one stays (the smaller index), so a run is reproducible.
                parent[max(ri, rj)] = min(ri, rj)
    return {i: (root(i), f"duplicate of {root(i)}") for i in kept if root(i) != i}


def group_contexts(
    graph: RelationGraph, descriptors: dict[int, str] | None, *, top_k: int
) -> Grouping:
    """Drop ambiguous and duplicate contexts, then spread the rest over conflict-free groups.

    Args:
        graph: Relations between the contexts, index order = rank order.
        descriptors: Index → descriptor from the extracted triples; None if unknown.
        top_k: How many of the best-ranked contexts to organize.
    """
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    organized = list(range(min(top_k, graph.n)))
    not_organized = list(range(len(organized), graph.n))

    merged = _drop_ambiguous(graph, organized, descriptors)
    kept = [i for i in organized if i not in merged]
    merged.update(_collapse_duplicates(graph, kept))
    kept = [i for i in kept if i not in merged]
    dropped = {i: why for i, (_, why) in merged.items()}
    into = {i: target for i, (target, _) in merged.items()}
    if not kept:
        return Grouping(groups=[], dropped=dropped, into=into, not_organized=not_organized)

    colour: dict[int, int] = {}
    for i in kept:
        rivals = [j for j in graph.neighbours(i, "counterfactual") if j in kept]
        if rivals:
            taken = {colour[j] for j in rivals if j in colour}
            colour[i] = next(c for c in range(len(kept)) if c not in taken)
    groups: list[list[int]] = [[] for _ in range(max(1, len(set(colour.values()))))]
    for i in kept:
        if i in colour:
            groups[colour[i]].append(i)
    for i in kept:
        if i not in colour:
            # min() keeps the first of equal sizes, i.e. the lowest group index.
            min(groups, key=len).append(i)
    return Grouping(
        groups=[sorted(g) for g in groups],
        dropped=dropped,
        into=into,
        not_organized=not_organized,
    )
