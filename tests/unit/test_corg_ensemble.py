"""The design card's pipeline: CORG groups the contexts and the ensemble strategy answers each group.

With a served model organize.strategy "auto" runs CORG, and organize.corg_answers "ensemble"
(the default) leaves its groups to the ensemble: each group is answered by the strategy's
members over the group's own passages and decided by its vote; CORG's aggregator combines the
group decisions. The controls: organize answering each group itself (the CORG paper's
aggregator, where no member is asked), and the dedupe path of a local model.
"""

from __future__ import annotations

from collections import Counter

import pytest
from langgraph.runtime import Runtime

from graphs.describe import trace_text
from infra.settings import Settings, load_settings
from nodes.ensemble import ensemble
from nodes.organize import organize
from nodes.synthesize import synthesize
from tests.support.fakes import node_of, pmids_in, script

ENDPOINT = {"provider": "openai", "model": "served-7b", "base_url": "http://127.0.0.1:9/v1"}
QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"
PLURAL = "Which roles do mitochondria play in remodelling lace plant leaves?"
MARKS = ["SIDE-YES", "SIDE-NO", "filler", "filler", "filler"]
PLANTED = [
    {
        "pmid": str(10 + k),
        "title": "Mitochondria in lace plant leaf remodelling",
        "abstract": f"{mark} abstract {k}.",
        "score": 0.0,
    }
    for k, mark in enumerate(MARKS)
]
"""10 says yes, 11 contradicts it (no); 12, 13 and 14 say nothing of it. The title puts each on
the question's subject, so synthesis's relevance check treats them as evidence."""


def served(settings: Settings, **changes: dict) -> Settings:
    """Every role on one OpenAI-compatible endpoint: "auto" organizes with CORG."""
    return load_settings(
        home=settings.home, models={"query": ENDPOINT, "ensemble": [ENDPOINT]}, **changes
    )


def side(text: str) -> str | None:
    return "yes" if "SIDE-YES" in text else "no" if "SIDE-NO" in text else None


def relation(messages, kwargs):
    text = messages[-1].content
    both = "SIDE-YES" in text and "SIDE-NO" in text
    triple = {"answer": "x", "entity": "mitochondria", "descriptor": ""}
    return {"first": triple, "second": triple, "label": "counterfactual" if both else "none"}


def first_read(messages, kwargs):
    """A reader with primacy bias: it answers from the first passage it is shown (a filler
    first misleads it to "no"), and cites that passage."""
    shown = pmids_in(messages)
    first = PLANTED[int(shown[0]) - 10]["abstract"]
    return {"answer": side(first) or "no", "pmids": shown[:1]}


def biased_model():
    """Members read with primacy bias; organize's own group call reads the group in rank order."""

    def group(messages, kwargs):
        said = first_read(messages, kwargs)
        return {
            "answer": said["answer"].title(),
            "exact": said["answer"],
            "cited_pmids": said["pmids"],
        }

    return script(
        relation=relation, pluralize={"question": PLURAL}, group=group, ensemble=first_read
    )


def members_decide_each_group(state: dict) -> bool:
    """Tell whether every group's answer is its strategy's vote over member calls of that group.

    The check (a) rests on: some member answered each group, from the group's passages only,
    and the group's answer is its vote table's winner, which is what most of them said.
    """
    voted = (state.get("votes") or {}).get("groups") or []
    if not state.get("groups") or len(voted) != len(state["groups"]):
        return False
    for vote, group in zip(voted, state["groups"], strict=True):
        mine = [m for m in state["members"] if m.get("group") == vote["group"]]
        if not mine or any(set(m["order"]) - set(group["pmids"]) for m in mine):
            return False
        said = Counter(m["answer"][0] for m in mine if m["answer"])
        winner = vote["decision"]["answers"][0]["answer"]
        if winner != group["exact"][0] or said.most_common(1)[0][0] != winner:
            return False
    return True


async def organized_then_ensembled(ctx, contexts=PLANTED, qtype="yesno") -> dict:
    """Run organize, then the ensemble, as the graph does (notes and calls add up)."""
    state = {"question": QUESTION, "qtype": qtype, "contexts": contexts}
    state |= await organize(state, Runtime(context=ctx))
    update = await ensemble(state, Runtime(context=ctx))
    added = {k: state.get(k, []) + update.get(k, []) for k in ("notes", "calls")}
    return state | update | added


# --- (a) the strategy's members answer each group, and its vote decides it ---------------------


async def test_a_served_model_s_corg_groups_are_each_decided_by_the_strategy_s_vote(
    make_context, settings
):
    chosen = served(settings)  # organize.strategy "auto", ensemble.strategy permute_vote, K = 5
    model = biased_model()
    state = await organized_then_ensembled(make_context(model, settings_=chosen))
    assert state["notes"][0].startswith("organize: strategy corg (organize.strategy 'auto'")
    assert [g["pmids"] for g in state["groups"]] == [["10", "12", "14"], ["11", "13"]]
    assert all(g["answered_by"] == "ensemble" and g["question"] == PLURAL for g in state["groups"])
    # organize asked the relations and the two plural forms, and answered no group itself.
    asked = Counter(node_of(c["messages"]) for c in model.calls)
    assert asked["pluralize"] == 2 and "group" not in asked
    # Every member call is tagged with its group and shows that group's passages only: five
    # orders of three passages; the two-passage group has two orders, each asked once.
    by_group = Counter(m["group"] for m in state["members"])
    assert by_group == {1: 5, 2: 2}
    assert len({tuple(m["order"]) for m in state["members"] if m["group"] == 1}) == 5
    assert members_decide_each_group(state)
    # The vote decided group 1, not one reading: the rank order's view (what organize's one
    # call reads) says yes, the orders with a filler first say no, and they are more.
    first_view = next(m for m in state["members"] if m["group"] == 1 and m["view"] == 0)
    assert first_view["answer"] == ["yes"] and state["groups"][0]["exact"] == ["no"]
    voted = state["votes"]["groups"][0]["votes"]
    assert voted["table"][0]["normalized"] == "no" and voted["table"][0]["votes"] >= 3
    decision = state["decision"]
    assert decision["source"] == "ensemble" and decision["strategy"] == "permute_vote"
    assert decision["answers"][0]["answer"] == "no" and not decision.get("plural")
    assert decision["why"].startswith("permute_vote in each CORG group: 2 of 2 group(s)")
    assert decision["settings"]["groups"] == 2 and decision["settings"]["members"] == 5
    # The aggregate's share counts how sure each group's vote was.
    shares = [g["share"] for g in state["groups"]]
    assert shares[1] == 1.0 and shares[0] < 1.0
    assert decision["share"] == pytest.approx(sum(shares) / 2, abs=1e-4)

    # Negative control: the bypass (organize answers each group, no member is asked), which
    # the same check rejects; its one rank-order reading of group 1 says yes.
    bypass = served(settings, organize={"corg_answers": "organize"})
    state = await organized_then_ensembled(make_context(biased_model(), settings_=bypass))
    assert state["members"] == [] and state["decision"]["source"] == "organize"
    assert not members_decide_each_group(state)
    assert state["groups"][0]["exact"] == ["yes"] and state["decision"]["plural"]


# --- (b) groups that disagree still give a plural answer --------------------------------------


def side_model(yes: str = "yes", no: str = "no", **replies):
    """Every reader answers with the side its passages hold, citing it."""

    def member(messages, kwargs):
        text = messages[-1].content
        said = yes if "SIDE-YES" in text else no
        cited = "10" if said == yes else "11"
        # CCV's members name the passage by its number in their view, with a quote.
        number = pmids_in(messages).index(cited) + 1
        return {"answer": said, "pmids": [cited], "passage": number, "quote": "abstract"}

    return script(relation=relation, pluralize={"question": PLURAL}, ensemble=member, **replies)


async def test_groups_that_disagree_give_a_plural_answer_claiming_neither_side(
    make_context, settings
):
    chosen = served(settings, synthesis={"mode": "vote"}, verify={"enabled": "off"})
    ctx = make_context(side_model(), settings_=chosen)
    state = await organized_then_ensembled(ctx)
    assert members_decide_each_group(state)
    assert [g["exact"] for g in state["groups"]] == [["yes"], ["no"]]
    decision = state["decision"]
    assert decision["plural"] and set(decision["conflict"]) == {"yes", "no"}
    assert decision["share"] == 0.0  # a yes/no conflict decides neither side
    assert [(a["answer"], a["cited"]) for a in decision["answers"]] == [
        ("yes", ["10"]),
        ("no", ["11"]),
    ]
    answer = (await synthesize(state, Runtime(context=ctx)))["answer"]
    assert answer["cited"] == ["10", "11"] and answer["confidence"] < 0.5
    assert answer["ideal"] == f"The abstracts conflict on \"{QUESTION}\": they answer 'yes', 'no'."


async def test_a_factoid_plural_keeps_each_group_s_answer_with_its_references(
    make_context, settings
):
    ctx = make_context(side_model("BAX", "BCL2"), settings_=served(settings))
    state = await organized_then_ensembled(ctx, qtype="factoid")
    decision = state["decision"]
    assert decision["plural"] and set(decision["conflict"]) == {"BAX", "BCL2"}
    assert {a["answer"]: a["cited"] for a in decision["answers"]} == {
        "BAX": ["10"],
        "BCL2": ["11"],
    }


async def test_the_synthesizer_reads_each_group_s_decided_answer(make_context, settings):
    told = []

    def synthesized(messages, kwargs):
        told.append(messages[-1].content)
        return {
            "exact_answer": "yes",
            "ideal_answer": "The abstracts disagree.",
            "confidence": 0.3,
            "cited_pmids": ["10", "11"],
        }

    ctx = make_context(side_model(synthesize=synthesized), settings_=served(settings))
    state = await organized_then_ensembled(ctx)
    await synthesize(state, Runtime(context=ctx))
    assert (
        'Answers per group of abstracts (answer, PMIDs): [["yes", ["10"]], ["no", ["11"]]]'
        in told[0]
    )
    assert "permute_vote in each CORG group: 2 of 2 group(s) answered apart and conflict" in told[0]


# --- what a small group costs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "pmids", "per_group"),
    [
        ("permute_vote", ["10", "11"], [1, 1]),  # a one-passage group: one call per model
        ("ccv", ["10", "11"], [1, 1]),  # CCV's K = 20 permutations of one passage: one
        ("ccv", ["10", "11", "12", "13", "14"], [6, 2]),  # 3! = 6 and 2! = 2 orders
        ("cobag", ["10", "11"], [1, 1]),  # every bag of one passage is that passage
        ("self_consistency", ["10", "11"], [5, 5]),  # samples differ by temperature: all asked
    ],
)
async def test_a_group_is_asked_each_distinct_greedy_view_once(
    make_context, settings, strategy, pmids, per_group
):
    chosen = served(settings, ensemble={"strategy": strategy})
    contexts = [PLANTED[int(p) - 10] for p in pmids]
    state = await organized_then_ensembled(make_context(side_model(), settings_=chosen), contexts)
    assert Counter(m["group"] for m in state["members"]) == dict(enumerate(per_group, 1))
    assert members_decide_each_group(state)


async def test_every_ensemble_model_answers_every_group(make_context, settings):
    second = side_model()
    ctx = make_context(side_model(), ensemble=[side_model(), second], settings_=served(settings))
    state = await organized_then_ensembled(ctx, [PLANTED[0], PLANTED[1]])
    assert Counter(m["group"] for m in state["members"]) == {1: 2, 2: 2}
    assert len(second.calls) == 2  # one call per group


# --- (c) the dedupe path is as it was --------------------------------------------------------


async def test_a_local_model_is_deduplicated_and_its_members_answer_the_top_m_as_before(
    make_context, settings
):
    model = script(organize={"duplicates": []}, ensemble={"answer": "yes", "pmids": ["10"]})
    contexts = [PLANTED[0], PLANTED[1]]
    state = await organized_then_ensembled(make_context(model, settings_=settings), contexts)
    assert state["notes"][0].startswith("organize: strategy dedupe (organize.strategy 'auto'")
    assert "groups" not in state and "groups" not in state["votes"]
    # K = 5 members over the top-m, cycling through the two orders: the ungrouped path keeps
    # its K whatever the passages (only a CORG group asks a repeated greedy view once).
    assert len(state["members"]) == 5 and not any("group" in m for m in state["members"])
    assert {tuple(m["order"]) for m in state["members"]} == {("10", "11"), ("11", "10")}
    decision = state["decision"]
    assert decision["source"] == "ensemble" and decision["strategy"] == "permute_vote"
    assert decision["why"] == "5 of 5 members answered 'yes' (majority vote)"
    assert decision["share"] == 1.0 and "plural" not in decision


# --- the trace: which group each member answered, each group's vote, the aggregate -----------


async def test_the_trace_shows_each_group_s_members_vote_and_decision_then_the_aggregate(
    make_context, settings
):
    ctx = make_context(side_model(), settings_=served(settings))
    state = {"question": QUESTION, "qtype": "yesno", "contexts": PLANTED}
    organized = await organize(state, Runtime(context=ctx))
    # organize's own step says the groups are the ensemble's to answer.
    lines = trace_text("organize", organized)[0]
    assert (
        lines.count("  answer: (the ensemble's to answer: organize.corg_answers 'ensemble')") == 2
    )
    assert not any(line.startswith("aggregate") for line in lines)
    update = await ensemble(state | organized, Runtime(context=ctx))
    lines = trace_text("ensemble", update)[0]
    assert lines[0] == (
        "strategy permute_vote in each of 2 CORG groups: 7 member call(s), 7 answered"
    )
    assert f"group 1: 10, 12, 14; asks: {PLURAL}" in lines
    assert f"group 2: 11, 13; asks: {PLURAL}" in lines
    assert "members, group 1:" in lines and "vote table, group 2:" in lines
    assert any(
        line.startswith("group 2 decision (permute_vote, by ensemble): 2 of 2") for line in lines
    )
    assert "group 1 answer carried by: 10" in lines
    assert any(
        line.startswith("aggregate (permute_vote, by ensemble): permute_vote in each CORG group")
        for line in lines
    )
