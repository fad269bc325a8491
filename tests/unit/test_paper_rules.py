"""Two rules drawn from the papers that no setting holds: what CoBag's synthesis reads, and
what carries a CORG group's answer.

test_paper_defaults.py holds the papers' numbers; these hold two rules of the methods' code
that every other test let change: CoBag's evidence order by rerank position instead of the
paper's relevance, and a CORG group that cites nothing claimed by all of its contexts.
"""

from __future__ import annotations

import pytest
from langgraph.runtime import Runtime

from nodes.ensemble import ensemble
from nodes.organize import organize
from nodes.organize.aggregate import supported_by
from nodes.organize.grouping import group_contexts
from nodes.organize.relations import Edge, RelationGraph
from nodes.organize.strategies.corg import group_shapes
from tests.support.fakes import script

QUESTION = "Do mitochondria remodel lace plant leaves during programmed cell death?"


# --- CoBag: the core reaches synthesis, most relevant first ----------------------------------


async def test_cobag_synthesis_reads_what_the_bags_showed_by_relevance_with_the_core_first(
    make_context, settings
):
    """context-bagging.txt §3.3 steps 1-2 and §3.4: the relevance s_i (Eq. 1) picks the top-r
    core that every bag holds, "preventing the loss of critical information".

    The paper votes and synthesizes nothing, so the evidence quorum's synthesis reads is
    ordered by that same s_i: the shown contexts, most relevant first, m of them, so the core
    is always read, first. Here the reranker put the two most relevant contexts last; an order
    by rank position (what the members saw, in rerank order) cuts both at m.
    """
    filler = [f"Soil sample {k} from a quarry in the north held gravel and clay." for k in range(6)]
    texts = [*filler, QUESTION, f"{QUESTION} Yes."]
    contexts = [
        {"pmid": str(200 + k), "title": "", "abstract": text, "score": 0.0}
        for k, text in enumerate(texts)
    ]
    bag = {"members": 5, "contexts": 4, "core": 2, "tau": 1.0, "pool": 8}
    chosen = settings.model_copy(
        update={
            "ensemble": settings.ensemble.model_copy(
                update={
                    "strategy": "cobag",
                    "cobag": settings.ensemble.cobag.model_copy(update=bag),
                }
            )
        }
    )
    model = script(ensemble={"answer": "yes", "pmids": []})
    state = {"question": QUESTION, "qtype": "yesno", "organized": contexts}
    update = await ensemble(state, Runtime(context=make_context(model, settings_=chosen)))

    relevance = update["votes"]["relevance"]
    by_relevance = sorted(relevance, key=lambda p: (-relevance[p], p))
    core = by_relevance[:2]
    assert core == ["206", "207"]  # the reranker's last two
    shown = update["decision"]["settings"]["shown"]
    assert all(set(core) <= set(m["order"]) for m in update["members"])
    assert len([p for p in shown if p not in core]) >= 4  # rank order alone would drop the core
    order = update["decision"]["order"]
    assert order == [p for p in by_relevance if p in shown][:4]
    assert order[:2] == core


# --- CORG: a group that cites nothing is carried by its counterfactual side alone ------------


def graph_of(n: int, labels: dict) -> RelationGraph:
    edges = {
        (a, b): Edge(a=a, b=b, label=labels.get((a, b), "none"), source="asked")
        for a in range(n)
        for b in range(a + 1, n)
    }
    return RelationGraph(n=n, edges=edges, asked=list(edges))


def test_a_group_citing_nothing_is_carried_by_its_side_never_by_the_contexts_dealt_in():
    """corg.txt §4 Reranker and Aggregator: counterfactual contexts go to distinct groups and
    the rest are "distributed evenly across groups"; each group's response is aggregated "with
    citations from the source contexts".

    Contexts dealt in to even the groups are not a group's sources: a group whose answer cites
    nothing is carried by its counterfactual side (and the duplicates dropped in its favour),
    and a group with no side by nothing (one unreferenced voice in the aggregate).
    """
    # 0 and 1 conflict; 5 duplicates 0; 2, 3 and 4 are filler dealt to the groups.
    graph = graph_of(6, {(0, 1): "counterfactual", (0, 5): "duplicated"})
    grouping = group_contexts(graph, None, top_k=6)
    assert grouping.groups == [[0, 2, 4], [1, 3]]
    first, second = groups_of(grouping, graph)
    assert supported_by(first, []) == ["0", "5"]
    assert supported_by(second, []) == ["1"]
    assert supported_by(first, ["2"]) == ["2"]  # what it cites, when it cites
    unrelated = graph_of(3, {})
    (only,) = groups_of(group_contexts(unrelated, None, top_k=3), unrelated)
    assert supported_by(only, []) == []


def groups_of(grouping, graph) -> list[dict]:
    """Return the group records organize writes for this grouping (PMIDs "0", "1", ...)."""
    contexts = [{"pmid": str(i)} for i in range(graph.n)]
    shapes = group_shapes(contexts, grouping, graph)
    return [
        {"pmids": [str(i) for i in group]} | shape
        for group, shape in zip(grouping.groups, shapes, strict=True)
    ]


MARKS = ["SIDE-YES", "SIDE-NO", "filler", "filler", "filler"]
PLANTED = [
    {"pmid": str(10 + k), "title": "", "abstract": f"{mark} abstract {k}.", "score": 0.0}
    for k, mark in enumerate(MARKS)
]


def silent_model(conflict: bool):
    """Label the two sides counterfactual (or every pair unrelated); groups cite nothing."""
    triple = {"answer": "x", "entity": "mitochondria", "descriptor": ""}

    def relation(messages, kwargs):
        text = messages[-1].content
        both = conflict and "SIDE-YES" in text and "SIDE-NO" in text
        return {"first": triple, "second": triple, "label": "counterfactual" if both else "none"}

    def answer(messages, kwargs):
        side = "no" if conflict and "SIDE-NO" in messages[-1].content else "yes"
        return {"answer": f"{side.title()}.", "exact": side, "cited_pmids": []}

    def member(messages, kwargs):
        return {"answer": answer(messages, kwargs)["exact"], "pmids": []}

    return script(
        relation=relation, pluralize={"question": "Which roles?"}, group=answer, ensemble=member
    )


@pytest.mark.parametrize("answers", ["ensemble", "organize"])
async def test_corg_answers_citing_nothing_are_weighed_by_their_sides_not_their_filler(
    make_context, settings, answers
):
    """corg.txt §4 Aggregator: the aggregate gives each answer with its source contexts.

    With nothing cited, the "yes" group of three (its side and two filler) weighs what the
    "no" group of two does, 0.5 each, and cites its side only; an answer with no side cites
    nothing rather than every context it was shown. So whoever answers the groups: the
    ensemble's members (organize.corg_answers "ensemble") or organize's one call each.
    """
    chosen = settings.model_copy(
        update={
            "organize": settings.organize.model_copy(
                update={"strategy": "corg", "corg_answers": answers}
            )
        }
    )
    state = {"question": QUESTION, "qtype": "yesno", "contexts": PLANTED}
    ctx = make_context(silent_model(conflict=True), settings_=chosen)
    update = await decided(state, ctx)
    assert [g["pmids"] for g in update["groups"]] == [["10", "12", "14"], ["11", "13"]]
    assert [g["supported_by"] for g in update["groups"]] == [["10"], ["11"]]
    assert update["decision"]["answers"] == [
        {"answer": "yes", "support": 0.5, "cited": ["10"]},
        {"answer": "no", "support": 0.5, "cited": ["11"]},
    ]
    uncached = chosen.model_copy(update={"home": chosen.home / "unrelated"})  # new relations
    ctx = make_context(silent_model(conflict=False), settings_=uncached)
    update = await decided(state, ctx)
    assert [g["supported_by"] for g in update["groups"]] == [[]]
    assert update["decision"]["answers"] == [{"answer": "yes", "support": 1.0, "cited": []}]


async def decided(state: dict, ctx) -> dict:
    """Organize, then the ensemble: the groups as answered and the decision the graph keeps."""
    update = await organize(state, Runtime(context=ctx))
    return update | await ensemble(state | update, Runtime(context=ctx))
