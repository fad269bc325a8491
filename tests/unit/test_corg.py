"""CORG relation graph construction and grouping, with scripted relation oracles."""

from __future__ import annotations

import asyncio
import json
import random
from itertools import combinations

import pytest
from pydantic import ValidationError

from nodes.organize.grouping import Grouping, group_contexts
from nodes.organize.relations import (
    Edge,
    PairRelation,
    Relation,
    RelationGraph,
    Triple,
    build_relation_graph,
)

LABELS: tuple[Relation, ...] = ("duplicated", "counterfactual", "distracting", "ambiguous", "none")


class Oracle:
    """Answer relate calls from a pair → label script and record the pairs asked."""

    def __init__(self, labels: dict[tuple[int, int], Relation], default: Relation | None = None):
        self.labels = labels
        self.default = default
        self.asked: list[tuple[int, int]] = []

    async def __call__(self, i: int, j: int) -> Relation:
        self.asked.append((i, j))
        await asyncio.sleep(0)
        if (i, j) in self.labels:
            return self.labels[(i, j)]
        if self.default is None:
            raise AssertionError(f"unexpected call for {(i, j)}")
        return self.default


def graph_of(n: int, labels: dict[tuple[int, int], Relation]) -> RelationGraph:
    """Return a graph whose listed pairs are asked edges and every other pair is "none"."""
    edges = {
        (a, b): Edge(a=a, b=b, label=labels.get((a, b), "none"), source="asked")
        for a, b in combinations(range(n), 2)
    }
    return RelationGraph(n=n, edges=edges, asked=list(edges))


def all_pairs(n: int) -> set[tuple[int, int]]:
    return set(combinations(range(n), 2))


# --- structured output ------------------------------------------------------------------------


def test_pair_relation_validates_labels_and_lengths():
    triple = {"answer": "CFTR", "entity": "cystic fibrosis", "descriptor": ""}
    parsed = PairRelation.model_validate({"first": triple, "second": triple, "label": "ambiguous"})
    assert parsed.first == Triple(**triple)
    with pytest.raises(ValidationError):
        PairRelation.model_validate({"first": triple, "second": triple, "label": "same"})
    with pytest.raises(ValidationError):
        Triple(answer="x" * 1000, entity="e", descriptor="")
    schema = Triple.model_json_schema()
    assert all(prop.get("description") for prop in schema["properties"].values())


# --- relation graph ---------------------------------------------------------------------------


SCRIPT_A: dict[tuple[int, int], Relation] = {
    (0, 1): "duplicated",
    (0, 2): "duplicated",
    (0, 3): "counterfactual",
    (0, 4): "none",
    (3, 4): "distracting",
}


async def test_anchor_round_mirrors_duplicates_and_counterfactuals():
    oracle = Oracle(SCRIPT_A)
    graph = await build_relation_graph(5, oracle, max_concurrency=4)

    # Round 1, anchor 0: every pair with 0. Everything else about 1, 2 and 3 is mirrored
    # through 0, except (3, 4): counterfactual with 0 and "none" from 0 is not inferable.
    # Round 2, anchor 3 (the first context with a missing edge): (3, 4).
    expected = [(0, 1), (0, 2), (0, 3), (0, 4), (3, 4)]
    assert oracle.asked == expected
    assert graph.asked == expected
    assert graph.rounds == [0, 3]
    assert (graph.calls, graph.naive_calls) == (5, 10)
    assert graph.calls < graph.naive_calls
    assert set(graph.edges) == all_pairs(5)
    mirrored = {p: (e.label, e.via) for p, e in graph.edges.items() if e.source == "mirrored"}
    assert mirrored == {
        (1, 2): ("duplicated", 0),
        (1, 3): ("counterfactual", 0),
        (2, 3): ("counterfactual", 0),
        (1, 4): ("none", 0),
        (2, 4): ("none", 0),
    }
    assert graph.label(4, 3) == "distracting"
    assert graph.neighbours(0, "duplicated") == [1, 2]
    assert graph.neighbours(3, "counterfactual") == [0, 1, 2]


async def test_counterfactual_anchor_neighbours_mirror_distracting_but_not_each_other():
    # 1 and 2 both contradict 0: they may agree with each other, so (1, 2) must be asked;
    # 3 distracts 0, so it distracts 1 and 2 too.
    script: dict[tuple[int, int], Relation] = {
        (0, 1): "counterfactual",
        (0, 2): "counterfactual",
        (0, 3): "distracting",
        (1, 2): "duplicated",
    }
    oracle = Oracle(script)
    graph = await build_relation_graph(4, oracle, max_concurrency=2)
    assert oracle.asked == [(0, 1), (0, 2), (0, 3), (1, 2)]
    assert graph.edges[(1, 3)] == Edge(a=1, b=3, label="distracting", source="mirrored", via=0)
    assert graph.edges[(2, 3)].source == "mirrored"


async def test_all_none_asks_every_pair():
    oracle = Oracle({}, default="none")
    graph = await build_relation_graph(5, oracle, max_concurrency=3)
    assert graph.calls == graph.naive_calls == 10
    assert graph.asked == sorted(all_pairs(5))
    assert graph.rounds == [0, 1, 2, 3]
    assert all(e.source == "asked" for e in graph.edges.values())


@pytest.mark.parametrize("n", [0, 1])
async def test_fewer_than_two_contexts_ask_nothing(n):
    graph = await build_relation_graph(n, Oracle({}), max_concurrency=1)
    assert (graph.calls, graph.naive_calls, graph.edges, graph.rounds) == (0, 0, {}, [])


async def test_round_calls_overlap():
    # The first call waits for the second to start: serial calls would time out.
    second_started = asyncio.Event()

    async def relate(i: int, j: int) -> Relation:
        if (i, j) == (0, 2):
            second_started.set()
        if (i, j) == (0, 1):
            await asyncio.wait_for(second_started.wait(), timeout=2)
        return "none"

    graph = await build_relation_graph(3, relate, max_concurrency=2)
    assert graph.edges[(0, 1)].source == "asked"


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_calls_in_flight_never_exceed_max_concurrency(limit):
    in_flight = peak = 0

    async def relate(i: int, j: int) -> Relation:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(3):
            await asyncio.sleep(0)
        in_flight -= 1
        return "none"

    await build_relation_graph(8, relate, max_concurrency=limit)
    assert peak == limit


async def test_failed_call_records_none_and_is_not_mirrored():
    script: dict[tuple[int, int], Relation] = {(0, 1): "duplicated", (1, 2): "distracting"}

    async def relate(i: int, j: int) -> Relation:
        if (i, j) == (0, 2):
            raise RuntimeError("model timed out")
        return script[(i, j)]

    graph = await build_relation_graph(3, relate, max_concurrency=2)
    failed = graph.edges[(0, 2)]
    assert (failed.label, failed.source) == ("none", "failed")
    assert "model timed out" in failed.error
    # A failure says nothing about (1, 2), so it is asked, not copied from (0, 2).
    assert graph.asked == [(0, 1), (0, 2), (1, 2)]
    assert graph.edges[(1, 2)].label == "distracting"


async def test_unknown_label_counts_as_failure():
    async def relate(i: int, j: int) -> Relation:
        return "similar"  # type: ignore[return-value]

    graph = await build_relation_graph(2, relate, max_concurrency=1)
    assert graph.edges[(0, 1)].source == "failed"


async def test_graph_to_dict_is_json():
    oracle = Oracle(SCRIPT_A)
    graph = await build_relation_graph(5, oracle, max_concurrency=2)
    data = json.loads(json.dumps(graph.to_dict()))
    assert (data["calls"], data["naive_calls"], data["rounds"]) == (5, 10, [0, 3])
    assert {"pair": [1, 2], "label": "duplicated", "source": "mirrored", "mirrored": True,
            "via": 0} in data["edges"]  # fmt: skip
    assert len(data["edges"]) == 10


async def test_random_oracles_cover_every_pair_once():
    rng = random.Random(20240601)
    for _ in range(200):
        n = rng.randint(0, 8)
        script = {p: rng.choice(LABELS) for p in combinations(range(n), 2)}
        oracle = Oracle(script)
        graph = await build_relation_graph(n, oracle, max_concurrency=rng.randint(1, 4))
        assert set(graph.edges) == all_pairs(n)
        assert all(e.a < e.b and (e.a, e.b) == p for p, e in graph.edges.items())
        assert len(set(oracle.asked)) == len(oracle.asked) == graph.calls
        assert graph.asked == oracle.asked
        mirrored = {p for p, e in graph.edges.items() if e.source == "mirrored"}
        assert set(graph.asked) | mirrored == all_pairs(n)
        assert not set(graph.asked) & mirrored
        assert all(graph.edges[p].label == script[p] for p in graph.asked)
        assert all(graph.edges[p].via in graph.rounds for p in mirrored)
        assert graph.rounds == sorted(set(graph.rounds))
        assert graph.calls <= graph.naive_calls


def truth(x: tuple[str, str], y: tuple[str, str]) -> Relation:
    """Return the relation of two (descriptor, answer) readings, per the definitions."""
    (dx, ax), (dy, ay) = x, y
    if dx and dy:
        if dx == dy:
            return "duplicated" if ax == ay else "counterfactual"
        return "distracting"
    if dx or dy:
        return "ambiguous" if ax == ay else "none"
    return "none"


async def test_mirrored_labels_match_a_consistent_oracle():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(2, 8)
        readings = [(rng.choice(["", "adults", "children"]), rng.choice("xy")) for _ in range(n)]
        script = {(a, b): truth(readings[a], readings[b]) for a, b in combinations(range(n), 2)}
        graph = await build_relation_graph(n, Oracle(script), max_concurrency=3)
        assert {p: e.label for p, e in graph.edges.items()} == script


# --- grouping ---------------------------------------------------------------------------------


def test_grouping_collapses_splits_drops_and_spreads():
    graph = graph_of(
        8,
        {
            (0, 1): "duplicated",
            (0, 2): "counterfactual",
            (1, 2): "counterfactual",
            (3, 4): "ambiguous",
            (4, 5): "distracting",
            (6, 7): "duplicated",
        },
    )
    descriptors = {0: "adults", 2: "adults", 3: "  ", 4: "in children", 5: "", 6: ""}
    grouping = group_contexts(graph, descriptors, top_k=7)
    assert grouping.dropped == {1: "duplicate of 0", 3: "ambiguous with 4"}
    assert grouping.groups == [[0, 4, 6], [2, 5]]
    assert grouping.not_organized == [7]


def test_ambiguous_without_descriptors_drops_the_later_member():
    graph = graph_of(3, {(0, 2): "ambiguous"})
    assert group_contexts(graph, None, top_k=3).dropped == {2: "ambiguous with 0"}
    # Both described: the descriptors do not say which to keep, so rank decides.
    both = group_contexts(graph, {0: "a", 2: "b"}, top_k=3)
    assert both.dropped == {2: "ambiguous with 0"}


def test_duplicate_chains_keep_the_best_ranked():
    graph = graph_of(5, {(1, 3): "duplicated", (3, 4): "duplicated"})
    grouping = group_contexts(graph, None, top_k=5)
    assert grouping.dropped == {3: "duplicate of 1", 4: "duplicate of 1"}
    assert grouping.groups == [[0, 1, 2]]


def test_mutual_counterfactuals_get_a_group_each():
    graph = graph_of(
        5, {(0, 1): "counterfactual", (0, 2): "counterfactual", (1, 2): "counterfactual"}
    )
    grouping = group_contexts(graph, None, top_k=5)
    assert grouping.groups == [[0, 3], [1, 4], [2]]


def test_counterfactual_with_a_dropped_context_does_not_split():
    graph = graph_of(3, {(0, 1): "duplicated", (1, 2): "counterfactual"})
    grouping = group_contexts(graph, None, top_k=3)
    assert grouping.groups == [[0, 2]]


def test_top_k_caps_the_organized_contexts():
    graph = graph_of(4, {(2, 3): "counterfactual"})
    grouping = group_contexts(graph, None, top_k=2)
    assert grouping.groups == [[0, 1]]
    assert grouping.not_organized == [2, 3]
    assert group_contexts(graph, None, top_k=0) == Grouping(groups=[], not_organized=[0, 1, 2, 3])


async def test_grouping_of_a_built_graph_is_json():
    graph = await build_relation_graph(5, Oracle(SCRIPT_A), max_concurrency=2)
    grouping = group_contexts(graph, None, top_k=5)
    assert grouping.groups == [[0, 4], [3]]
    data = json.loads(json.dumps(grouping.to_dict()))
    assert data == {
        "groups": [[0, 4], [3]],
        "dropped": [
            {"index": 1, "reason": "duplicate of 0"},
            {"index": 2, "reason": "duplicate of 0"},
        ],
        "not_organized": [],
    }


# --- ablation baselines ----------------------------------------------------------------------

from nodes.organize.strategies import STRATEGIES  # noqa: E402


def baseline_groups(n, strategy, **kwargs):
    return STRATEGIES[strategy].groups(n, **kwargs)


def test_base_and_separate_baselines():
    assert baseline_groups(4, "base", groups=3) == [[0, 1, 2, 3]]
    assert baseline_groups(3, "separate", groups=3) == [[0], [1], [2]]
    assert baseline_groups(0, "base", groups=3) == []


def test_random_baseline_is_a_seeded_partition_into_k_groups():
    first = baseline_groups(7, "random", groups=3, seed=5)
    assert first == baseline_groups(7, "random", groups=3, seed=5)
    assert len(first) == 3 and sorted(i for g in first for i in g) == list(range(7))
    assert all(g == sorted(g) for g in first)
    assert (
        baseline_groups(2, "random", groups=3, seed=5) != []
        and len(baseline_groups(2, "random", groups=3)) <= 2
    )


def test_kmeans_baseline_clusters_vectors():
    import numpy as np

    vectors = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [1, 0.05]], dtype=np.float32)
    groups = baseline_groups(5, "kmeans", groups=2, vectors=vectors)
    assert sorted(map(sorted, groups)) == [[0, 1, 4], [2, 3]]
    with pytest.raises(ValueError, match="needs the contexts' vectors"):
        baseline_groups(5, "kmeans", groups=2)
