"""CORG's aggregator and prompt budget, and the paper's retrieve and summarize baselines."""

from __future__ import annotations

import pytest
from langgraph.runtime import Runtime

from graphs.describe import trace_text
from infra.models import ChatModel
from infra.settings import ModelSpec
from lab.trials.organize_measures import pair_outcomes
from nodes.ensemble import ensemble
from nodes.organize import organize
from nodes.organize.aggregate import aggregate
from nodes.organize.answers import passage_chars
from nodes.organize.grouping import group_contexts
from nodes.organize.relations import Edge, RelationGraph
from nodes.synthesize import synthesize
from tests.support.fakes import node_of, pmids_in, script

QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"


def group(pmids, answer, exact=None, covers=None, cited=None, error=None) -> dict:
    return {
        "pmids": pmids,
        "question": "q",
        "answer": answer,
        "cited": cited if cited is not None else pmids[:1],
        "error": error,
        "exact": exact if exact is not None else [answer],
        "covers": covers or pmids,
    }


def graph_of(n: int, labels: dict) -> RelationGraph:
    edges = {
        (a, b): Edge(a=a, b=b, label=labels.get((a, b), "none"), source="asked")
        for a in range(n)
        for b in range(a + 1, n)
    }
    return RelationGraph(n=n, edges=edges, asked=list(edges))


def with_organize(settings, **changes):
    return settings.model_copy(update={"organize": settings.organize.model_copy(update=changes)})


# --- the aggregate ----------------------------------------------------------------------------
# The paper's aggregator (§4): every group's answer with the contexts that carry it; a group's
# size, swollen by the contexts the reranker deals in, carries nothing.

GATE = 0.5
"""synthesis.mode "vote" confidence a router takes as sure (lab/trials/organize_measures.py's gate)."""


def size_weighted_share(groups: list[dict]) -> float:
    """The old rule, kept as the negative control: the first answer by its groups' sizes."""
    weights: dict[str, int] = {}
    for g in groups:
        weights[g["exact"][0]] = weights.get(g["exact"][0], 0) + len(g["covers"])
    return max(weights.values()) / sum(weights.values())


# One "yes" abstract (0), its counterfactual "no" (1), three unrelated ones dealt evenly.
FILLED = [
    group(["0", "2", "4"], "Yes, in lace plants.", ["yes"], cited=["0"]),
    group(["1", "3"], "No, not in leaves.", ["no"], cited=["1"]),
]


def test_a_conflict_is_plural_and_below_the_gate_however_the_filler_falls():
    decision = aggregate(FILLED, "yesno", settings={"top_k": 10})
    assert decision["source"] == "organize" and decision["strategy"] == "corg"
    assert decision["answers"] == [
        {"answer": "yes", "support": 0.5, "cited": ["0"]},
        {"answer": "no", "support": 0.5, "cited": ["1"]},
    ]
    assert decision["plural"] is True and decision["conflict"] == ["yes", "no"]
    assert decision["share"] < GATE
    assert "conflict" in decision["why"] and "decides neither side" in decision["why"]
    assert "(PMIDs 0)" in decision["why"] and "(PMIDs 1)" in decision["why"]
    assert decision["settings"] == {"top_k": 10}
    # Negative control: weighing by group size made rank 1's filler-swollen group final.
    assert size_weighted_share(FILLED) == 0.6 >= GATE


def test_a_filler_heavy_group_cannot_carry_its_answer():
    # The three-context group cites one; the two-context group cites both of its own.
    groups = [
        group(["0", "2", "4"], "IL-6", ["IL-6"], cited=["0"]),
        group(["1", "3"], "TNF", ["TNF"], cited=["1", "3"]),
    ]
    decision = aggregate(groups, "factoid")
    assert [(r["answer"], r["support"]) for r in decision["answers"]] == [
        ("TNF", 0.6667),
        ("IL-6", 0.3333),
    ]
    assert decision["order"] == ["1", "3", "0", "2", "4"]
    # Groups that cite nothing each count as one unreferenced voice, whatever their size.
    silent = [group(["0", "2", "4"], "yes", cited=[]), group(["1", "3"], "no", cited=[])]
    decision = aggregate(silent, "yesno")
    assert [r["support"] for r in decision["answers"]] == [0.5, 0.5]
    assert [r["cited"] for r in decision["answers"]] == [[], []] and decision["share"] == 0.0


def test_corg_supported_by_outweighs_what_a_group_cites_and_holds():
    # CORG credits the duplicates dropped in favour of the cited context, not the filler.
    groups = [
        group(["0", "2", "4"], "yes", cited=["0"]) | {"supported_by": ["0", "5", "6"]},
        group(["1", "3"], "no", cited=["1"]) | {"supported_by": ["1"]},
    ]
    decision = aggregate(groups, "yesno")
    assert decision["answers"][0] == {"answer": "yes", "support": 0.75, "cited": ["0", "5", "6"]}
    assert decision["plural"] and decision["share"] < GATE


def test_agreeing_groups_give_one_confident_answer():
    groups = [group(["0", "2"], "yes", cited=["0"]), group(["1", "3"], "Yes.", ["yes"], ["1"])]
    decision = aggregate(groups, "yesno")
    assert decision["answers"] == [{"answer": "yes", "support": 1.0, "cited": ["0", "1"]}]
    assert decision["share"] == 1.0 >= GATE and "plural" not in decision
    assert "agree" in decision["why"]
    # A failed group's side is unknown: the agreement of the rest is only as sure as they are.
    failed = [*groups, group(["5"], "", [], error="timed out")]
    assert aggregate(failed, "yesno")["share"] == 0.6667


def test_factoid_keeps_every_distinct_answer_with_its_references():
    groups = [
        group(["1"], "IL-6 (adults)", ["IL-6", "TNF"]),
        group(["2"], "Interleukin 1", ["Interleukin 1"]),
        group(["3"], "il-6 (children)", ["il-6"]),
        group(["4"], "", [], error="timed out"),
    ]
    decision = aggregate(groups, "factoid", strategy="random")
    assert [(r["answer"], r["support"], r["cited"]) for r in decision["answers"]] == [
        ("IL-6", 0.6667, ["1", "3"]),
        ("TNF", 0.3333, ["1"]),
        ("Interleukin 1", 0.3333, ["2"]),
    ]
    assert decision["plural"] and decision["conflict"] == ["IL-6", "Interleukin 1"]
    assert decision["share"] == 0.5  # IL-6's support, times the 3 of 4 groups that answered
    assert decision["order"] == ["1", "3", "2", "4"] and decision["strategy"] == "random"


def test_list_and_summary_keep_every_group_answer_in_one():
    groups = [group(["1"], "CFTR in adults", ["CFTR"]), group(["2"], "TP53", ["TP53", "cftr"])]
    decision = aggregate(groups, "list")
    (listed,) = decision["answers"]
    assert listed == {"answer": ["CFTR", "TP53"], "support": 1.0, "cited": ["1", "2"]}
    assert "plural" not in decision and decision["share"] == 1.0
    (summary,) = aggregate(groups, "summary")["answers"]
    assert summary["answer"] == "CFTR in adults; TP53"


def test_no_answer_is_an_empty_decision():
    decision = aggregate([group(["1"], "", [], error="x")], "yesno")
    assert decision["answers"] == [] and "none gave an answer" in decision["why"]
    assert decision["share"] == 0.0


# --- what a prompt may show -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "chars", "shown", "expected"),
    [
        ("local", None, 2, 2500),
        ("local", None, 10, 500),
        ("local", None, 30, 500),
        ("openai", None, 2, 30000),
        ("openai", 800, 4, 2000),
    ],
)
def test_a_prompt_shares_the_budget_of_top_k_passages(provider, chars, shown, expected):
    spec = ModelSpec(provider=provider, base_url="http://x", context_chars=chars)
    assert passage_chars(ChatModel(spec=spec, llm=None), shown, top_k=10) == expected


def test_dropped_contexts_count_for_the_group_that_stands_for_them():
    # 3 is ambiguous with 4 (dropped: no descriptor); 4 then duplicates 0.
    graph = graph_of(6, {(3, 4): "ambiguous", (0, 4): "duplicated", (0, 1): "counterfactual"})
    grouping = group_contexts(graph, {3: "", 4: "adults"}, top_k=6)
    assert grouping.dropped == {3: "ambiguous with 4", 4: "duplicate of 0"}
    assert grouping.groups == [[0, 2], [1, 5]]
    assert grouping.covers() == [[0, 2, 3, 4], [1, 5]]


# --- the node writes the decision -------------------------------------------------------------


async def test_corg_writes_the_aggregate_as_the_decision(make_context, settings, index):
    triple = {"answer": "yes", "entity": "mitochondria", "descriptor": "lace plant"}

    def relation(messages, kwargs):
        text = messages[-1].content
        same = text.count("Cyclosporin A") == 2
        return {"first": triple, "second": triple, "label": "duplicated" if same else "none"}

    model = script(
        relation=relation,
        pluralize={"question": "Which organelles?"},
        group=lambda m, kw: {
            "answer": "Mitochondria, in lace plants",
            "exact": ["mitochondria"],
            "cited_pmids": pmids_in(m)[:1],
        },
    )
    # The paper's aggregator: organize answers each group itself, one call per group.
    chosen = with_organize(settings, strategy="corg", corg_answers="organize")
    ctx = make_context(model, settings_=chosen)
    state = {"question": QUESTION, "qtype": "factoid", "contexts": index.fetch(["101", "108"])}
    update = await organize(state, Runtime(context=ctx))
    assert update["groups"][0]["exact"] == ["mitochondria"]
    assert update["groups"][0]["covers"] == ["101", "108"]
    # It cites 101; 108, dropped as its duplicate, says the same and carries the answer too.
    assert update["groups"][0]["supported_by"] == ["101", "108"]
    decision = update["decision"]
    assert decision["answers"] == [
        {"answer": "mitochondria", "support": 1.0, "cited": ["101", "108"]}
    ]
    assert decision["settings"]["relations"] == "graph"
    assert decision["settings"]["relation_chars"] == 2500  # local: 500 x top_k 10 / 2
    assert decision["settings"]["strategy"] == "corg" and decision["settings"]["top_k"] == 10
    assert decision["settings"]["answers"] == "organize" and decision["source"] == "organize"
    # What `quorum trace show` prints of it, after the relations and the groups.
    lines = trace_text("organize", update)[0]
    assert "  stands for: 101, 108" in lines and "  exact: mitochondria" in lines
    at = lines.index(f"aggregate (corg, by organize): {decision['why']}")
    assert lines[at + 1 :] == [
        "answers:",
        "  #  answer        support  cites",
        "  1  mitochondria        1  101, 108",
        "evidence order: 101",
        "settings: " + ", ".join(f"{k}={v}" for k, v in decision["settings"].items()),
    ]
    assert "relation_chars=2500" in lines[-1]


async def test_no_groups_no_decision(make_context, settings, index):
    corg = make_context(script(), settings_=with_organize(settings, strategy="corg"))
    one = {"question": QUESTION, "qtype": "yesno", "contexts": index.fetch(["101"])}
    assert await organize(one, Runtime(context=corg)) == {
        "organized": index.fetch(["101"]),
        "relations": [],
        "groups": [],
        "notes": ["organize: strategy corg (organize.strategy 'corg')"],
    }
    dedupe = make_context(script(organize={"duplicates": []}), settings_=settings)
    two = one | {"contexts": index.fetch(["101", "103"])}
    assert "decision" not in await organize(two, Runtime(context=dedupe))


@pytest.mark.parametrize(("strategy", "plural"), [("base", False), ("random", True)])
async def test_base_asks_as_it_stands_and_random_as_corg_would(
    make_context, settings, index, strategy, plural
):
    model = script(
        pluralize={"question": "What roles do mitochondria play?"},
        group=lambda m, kw: {"answer": "yes", "exact": "yes", "cited_pmids": pmids_in(m)},
    )
    chosen = with_organize(settings, strategy=strategy, groups=1)
    state = {"question": QUESTION, "qtype": "yesno", "contexts": index.fetch(["101", "103"])}
    update = await organize(state, Runtime(context=make_context(model, settings_=chosen)))
    (answered,) = update["groups"]
    assert (answered["question"] != QUESTION) is plural
    assert update["decision"]["answers"][0]["answer"] == "yes"
    assert update["decision"]["settings"]["reformulate"] is plural


# --- retrieve and summarize -------------------------------------------------------------------


async def test_retrieve_answers_the_top_of_the_models_ranking(make_context, settings, index):
    model = script(
        retrieve={"ranking": [3, 3, 1]},
        group=lambda m, kw: {"answer": "yes", "exact": "yes", "cited_pmids": pmids_in(m)[:1]},
    )
    chosen = with_organize(settings, strategy="retrieve", retrieve_top=3)
    contexts = index.fetch(["101", "103", "106", "107"])
    state = {"question": QUESTION, "qtype": "yesno", "contexts": contexts}
    update = await organize(state, Runtime(context=make_context(model, settings_=chosen)))
    # The model's two, then the ranking is filled in rank order up to retrieve_top.
    assert [c["pmid"] for c in update["organized"]] == ["106", "101", "103"]
    assert update["groups"][0]["pmids"] == ["106", "101", "103"]
    assert update["groups"][0]["question"] == QUESTION  # one run, no reformulation
    assert pmids_in(model.calls[1]["messages"]) == ["106", "101", "103"]
    assert update["notes"] == [
        "organize: strategy retrieve (organize.strategy 'retrieve')",
        "organize: retrieve kept 3 of 4 contexts (2 ranked by the model)",
    ]
    assert update["decision"]["settings"]["retrieve_top"] == 3


async def test_summarize_answers_from_the_summary_alone(make_context, settings, index):
    model = script(
        summarize={"summary": "Mitochondria drive the remodelling (101)."},
        group={"answer": "Yes", "exact": "yes", "cited_pmids": ["101"]},
    )
    chosen = with_organize(settings, strategy="summarize")
    state = {"question": QUESTION, "qtype": "yesno", "contexts": index.fetch(["101", "103"])}
    update = await organize(state, Runtime(context=make_context(model, settings_=chosen)))
    asked = model.calls[1]["messages"][-1].content
    assert "Summary of PMIDs 101, 103:\nMitochondria drive the remodelling" in asked
    assert "Cyclosporin" not in asked and pmids_in(model.calls[1]["messages"]) == []
    assert update["groups"][0]["cited"] == ["101"] and update["groups"][0]["shown"]
    assert update["decision"]["answers"] == [{"answer": "yes", "support": 1.0, "cited": ["101"]}]
    failed = script(summarize=RuntimeError("down"))
    uncached = chosen.model_copy(update={"home": chosen.home / "elsewhere"})
    update = await organize(state, Runtime(context=make_context(failed, settings_=uncached)))
    assert update["groups"][0]["error"].startswith("summary failed")
    assert "decision" not in update and len(update["calls"]) == 1  # no answer call after it


# --- a conflict reaches the answer plural; the control without relations ---------------------

MARKS = ["SIDE-YES", "SIDE-NO", "filler", "filler", "filler"]
PLANTED = [
    {
        "pmid": str(10 + k),
        "title": "",
        "abstract": f"{mark} abstract {k} on mitochondria in lace plant programmed cell death.",
        "score": 0.0,
    }
    for k, mark in enumerate(MARKS)
]


def planted_model():
    """Relations: the two sides are counterfactual, the rest unrelated; each group (organize's
    call or an ensemble member) answers with the side it holds and cites it (a group holding
    both, as without relations, says yes).
    """
    triple = {"answer": "x", "entity": "mitochondria", "descriptor": ""}

    def relation(messages, kwargs):
        text = messages[-1].content
        label = "counterfactual" if "SIDE-YES" in text and "SIDE-NO" in text else "none"
        return {"first": triple, "second": triple, "label": label}

    def answer(messages, kwargs):
        text = messages[-1].content
        side = "yes" if "SIDE-YES" in text else "no"
        cited = "10" if side == "yes" else "11"
        return {"answer": f"{side.title()}.", "exact": side, "cited_pmids": [cited]}

    def member(messages, kwargs):
        reply = answer(messages, kwargs)
        return {"answer": reply["exact"], "pmids": reply["cited_pmids"]}

    return script(
        relation=relation, pluralize={"question": "Which roles?"}, group=answer, ensemble=member
    )


@pytest.mark.parametrize("answers", ["ensemble", "organize"])
async def test_a_yesno_conflict_is_never_a_confident_answer_in_vote_mode(
    make_context, settings, answers
):
    # Whoever answers the groups (the ensemble's members, the default; or organize's own
    # call, the paper's aggregator), CORG's aggregator keeps both sides and claims neither.
    chosen = with_organize(settings, strategy="corg", corg_answers=answers).model_copy(
        update={"synthesis": settings.synthesis.model_copy(update={"mode": "vote"})}
    )
    ctx = make_context(planted_model(), settings_=chosen)
    state = {"question": QUESTION, "qtype": "yesno", "contexts": PLANTED}
    state |= await organize(state, Runtime(context=ctx))
    assert [g["pmids"] for g in state["groups"]] == [["10", "12", "14"], ["11", "13"]]
    state |= await ensemble(state, Runtime(context=ctx))
    assert [g["supported_by"] for g in state["groups"]] == [["10"], ["11"]]
    assert bool(state["members"]) is (answers == "ensemble")
    assert state["decision"]["plural"] and state["decision"]["share"] < GATE
    answer = (await synthesize(state, Runtime(context=ctx)))["answer"]
    assert answer["confidence"] < GATE and answer["source"] == "decision"
    assert answer["cited"] == ["10", "11"]  # both sides, each with its reference
    # Plain prose: the references ride beside it (cited), never inside the ideal answer.
    assert answer["ideal"] == f"The abstracts conflict on \"{QUESTION}\": they answer 'yes', 'no'."


async def test_without_relations_no_pair_is_asked_and_no_conflict_split(make_context, settings):
    control = with_organize(
        settings, strategy="corg", corg_relations="none", corg_answers="organize"
    )
    model = planted_model()
    state = {"question": QUESTION, "qtype": "yesno", "contexts": PLANTED}
    update = await organize(state, Runtime(context=make_context(model, settings_=control)))
    assert not [c for c in model.calls if node_of(c["messages"]) == "relation"]
    assert update["relation_graph"]["calls"] == 0 and update["relations"] == []
    assert [g["pmids"] for g in update["groups"]] == [["10", "11", "12", "13", "14"]]
    split, _ = pair_outcomes([g["pmids"] for g in update["groups"]], [("10", "11")], [])
    assert split == [False]
    assert update["decision"]["settings"]["relations"] == "none"
    assert "organize: corg_relations 'none' (control): no relation graph" in update["notes"]
