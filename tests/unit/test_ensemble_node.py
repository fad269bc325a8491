"""The ensemble node's strategies with scripted members: views, calls, and the decision."""

import json

import pytest
from langgraph.runtime import Runtime

from nodes.ensemble import StrategyUnavailable, ensemble
from tests.support.fakes import pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"
PMIDS = ["101", "102", "103", "105", "104", "106", "107", "108"]


def with_ensemble(settings, **changes):
    groups = {k: changes.pop(k) for k in ("cobag", "ccv", "moi") if k in changes}
    ensemble_settings = settings.ensemble.model_copy(update=changes)
    for name, values in groups.items():
        group = getattr(settings.ensemble, name).model_copy(update=values)
        ensemble_settings = ensemble_settings.model_copy(update={name: group})
    return settings.model_copy(update={"ensemble": ensemble_settings})


async def run(
    make_context,
    settings,
    model,
    qtype="yesno",
    pmids=PMIDS,
    ensemble_models=None,
    state=None,
    **ch,
):
    ctx = make_context(model, ensemble=ensemble_models, settings_=with_ensemble(settings, **ch))
    contexts = ctx.search.fetch(pmids)
    state = state or {"question": QUESTION, "qtype": qtype, "organized": contexts}
    return await ensemble(state, Runtime(context=ctx))


def schema_of(call):
    """Return the JSON schema a member call asked for (the scripted model gets it in words)."""
    text = call["messages"][0].content
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


def prompt_of(call):
    return "\n".join(m.content for m in call["messages"])


async def test_single_makes_one_greedy_call_and_decides_in_rank_order(make_context, settings):
    model = script(ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]})
    update = await run(make_context, settings, model, strategy="single", contexts=3)
    assert len(update["members"]) == 1 and len(model.calls) == 1
    assert update["members"][0]["order"] == PMIDS[:3]
    decision = update["decision"]
    assert decision["strategy"] == "single" and decision["source"] == "ensemble"
    assert decision["answers"] == [{"answer": "yes", "support": 1.0, "cited": ["101"]}]
    assert decision["order"] == PMIDS[:3] and decision["share"] == 1.0
    assert decision["settings"]["contexts"] == 3 and decision["settings"]["temperature"] == 0.0
    assert decision["settings"]["models"] == ["scripted"]


async def test_self_consistency_samples_the_same_view_and_records_its_settings(
    make_context, settings
):
    replies = iter(["yes", "no", "yes", "yes"])
    model = script(ensemble=lambda m, kw: {"answer": next(replies), "pmids": []})
    update = await run(
        make_context, settings, model, strategy="self_consistency", members=4, contexts=5
    )
    assert {tuple(m["order"]) for m in update["members"]} == {tuple(PMIDS[:5])}
    assert all(c["kwargs"]["temperature"] == 1.0 for c in model.calls)
    assert len(model.calls) == 4  # sampled calls are never served from the cache
    decision = update["decision"]
    assert [(a["answer"], a["support"]) for a in decision["answers"]] == [("yes", 3.0), ("no", 1.0)]
    assert decision["share"] == 0.75 and "3 of 4 members answered 'yes'" in decision["why"]
    assert (
        decision["settings"] | {"members": 4, "contexts": 5, "temperature": 1.0, "seed": 13}
        == (decision["settings"])
    )


async def test_a_factoid_member_names_one_answer_and_votes_once(make_context, settings):
    # One answer per member (the papers' vote), not five candidates each (an approval vote).
    replies = iter(["IL-6", "IL 6", "TNF", "IL6", "TNF"])
    model = script(ensemble=lambda m, kw: {"answer": next(replies), "pmids": []})
    update = await run(
        make_context, settings, model, qtype="factoid", strategy="permute_vote", members=5
    )
    answer = schema_of(model.calls[0])["properties"]["answer"]
    assert answer["type"] == "string"
    assert "one best short answer" in prompt_of(model.calls[0])
    answers = update["decision"]["answers"]
    assert answers[0]["support"] == 3.0 and answers[0]["answer"] in ("IL-6", "IL6")
    assert (answers[1]["answer"], answers[1]["support"]) == ("TNF", 2.0)


async def test_cobag_draws_m_of_a_larger_pool_fed_beyond_what_organize_read(
    make_context, settings, index
):
    # organize read the top 3 (organize.top_k) and kept 101 and 103; the contexts rerank
    # passed beyond those feed CoBag's pool too.
    model = script(ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]})
    chosen = settings.model_copy(
        update={"organize": settings.organize.model_copy(update={"top_k": 3})}
    )
    contexts = index.fetch(PMIDS)
    state = {
        "question": QUESTION,
        "qtype": "yesno",
        "contexts": contexts,
        "organized": [contexts[0], contexts[2]],
    }
    update = await run(
        make_context,
        chosen,
        model,
        state=state,
        strategy="cobag",
        cobag={"members": 6, "contexts": 4, "core": 2, "tau": 0.5, "pool": 7},
    )
    pool = ["101", "103", "105", "104", "106", "107", "108"]  # 102 was dropped by organize
    relevance = update["votes"]["relevance"]
    assert list(relevance) == pool
    core = sorted(pool, key=lambda p: (-relevance[p], pool.index(p)))[:2]
    members = update["members"]
    assert len(members) == 6 and all(len(m["order"]) == 4 for m in members)
    assert all(set(core) <= set(m["order"]) for m in members)
    assert len({frozenset(m["order"]) for m in members}) > 1  # subsets differ, not only orders
    settings_ = update["decision"]["settings"]
    assert settings_ | {"members": 6, "contexts": 4, "core": 2, "tau": 0.5, "pool": 7} == settings_
    assert settings_["pool_available"] == 7
    order = update["decision"]["order"]
    shown = {p for m in members for p in m["order"]}
    assert set(order) <= shown and len(order) == 4
    assert order == sorted(order, key=lambda p: -relevance[p])  # most relevant first
    assert not any("cobag" in n for n in update["notes"])


async def test_cobag_says_when_its_pool_is_no_larger_than_m(make_context, settings):
    model = script(ensemble={"answer": "yes", "pmids": []})
    update = await run(
        make_context,
        settings,
        model,
        pmids=PMIDS[:4],
        strategy="cobag",
        cobag={"members": 2, "contexts": 5, "core": 2},
    )
    assert update["decision"]["settings"]["pool_available"] == 4
    assert any("no larger than m = 5" in n for n in update["notes"])
    assert all(sorted(m["order"]) == sorted(PMIDS[:4]) for m in update["members"])


@pytest.mark.parametrize("said", [("yes", "no"), ("no", "yes")])
async def test_cobag_breaks_a_tie_toward_the_most_relevant_view(make_context, settings, said):
    # One vote each: a tie by construction. Either way round, the most relevant view's
    # answer wins (a name or rank rule would pick the same answer both times).
    replies = iter(said)
    model = script(ensemble=lambda m, kw: {"answer": next(replies), "pmids": []})
    update = await run(
        make_context,
        settings,
        model,
        strategy="cobag",
        cobag={"members": 2, "contexts": 2, "core": 1, "tau": 10.0},
    )
    relevance = update["votes"]["relevance"]

    def mean(member):
        return sum(relevance[p] for p in member["order"]) / len(member["order"])

    first, second = update["members"]
    assert mean(first) != mean(second)
    best = max(update["members"], key=mean)
    assert update["decision"]["answers"][0]["answer"] == best["answer"][0]
    assert "a tie" in update["decision"]["why"] and "relevance" in update["decision"]["why"]


def citing(plan):
    """Reply as planned: (answer, PMID cited) per call, the PMID's number in that view."""

    def reply(messages, kwargs):
        answer, pmid = next(plan)
        quote = "Mitochondria" if pmid else "q"
        number = pmids_in(messages).index(pmid) + 1 if pmid else 9
        return {"answer": answer, "passage": number, "quote": quote}

    return reply


async def test_ccv_decides_by_citations_and_its_decision_is_what_is_written(make_context, settings):
    # Three members say "CFTR", each citing another abstract; two say "ENaC" and both cite
    # PMID 102 wherever their view put it: CCV picks ENaC although CFTR has more votes.
    plan = iter(
        [("CFTR", "101"), ("CFTR", "103"), ("CFTR", "105"), ("ENaC", "102"), ("ENaC", "102")]
    )
    model = script(ensemble=citing(plan))
    update = await run(
        make_context,
        settings,
        model,
        qtype="factoid",
        strategy="ccv",
        ccv={"members": 5, "contexts": 4},
    )
    members = update["members"]
    assert len(members) == 5  # K = ccv.members
    assert all(m["pmids"] == [m["order"][m["passage"] - 1]] for m in members)  # index → PMID
    assert update["votes"]["table"][0]["answer"] == "CFTR"  # what a plain majority would pick
    decision = update["decision"]
    assert [(a["answer"], a["support"]) for a in decision["answers"]] == [
        ("ENaC", 2.0),
        ("CFTR", 1.0),
    ]
    assert decision["answers"][0]["cited"] == ["102"]
    assert decision["order"][0] == "102" and sorted(decision["order"]) == sorted(PMIDS[:4])
    assert decision["share"] == pytest.approx(2 / 5)
    assert "a plain majority would pick 'CFTR'" in decision["why"]
    assert decision["settings"] | {"members": 5, "evidence": "relaxed"} == decision["settings"]


async def test_ccv_defaults_to_the_paper_s_k_and_asks_for_one_answer(make_context, settings):
    model = script(ensemble=lambda m, kw: {"answer": "CFTR", "passage": 1, "quote": "q"})
    update = await run(make_context, settings, model, qtype="factoid", strategy="ccv")
    assert len(update["members"]) == 20 == update["decision"]["settings"]["members"]
    schema = schema_of(model.calls[0])
    assert schema["properties"]["answer"]["type"] == "string" and "quote" in schema["properties"]
    assert "Give up to 5" not in prompt_of(model.calls[0])


async def test_ccv_votes_a_list_question_by_majority_and_says_so(make_context, settings):
    model = script(ensemble={"answer": ["CFTR", "ENaC"], "pmids": ["101"]})
    update = await run(
        make_context, settings, model, qtype="list", strategy="ccv", ccv={"members": 3}
    )
    assert "passage" not in schema_of(model.calls[0])["properties"]  # no citation asked
    decision = update["decision"]
    assert decision["answers"] == [{"answer": ["CFTR", "ENaC"], "support": 1.0, "cited": ["101"]}]
    assert "CCV needs one answer per member" in decision["why"]


async def test_moi_is_refused_without_likelihoods(make_context, settings):
    model = script(ensemble={"answer": "yes", "pmids": []})
    with pytest.raises(StrategyUnavailable, match="prompt log-probabilities"):
        await run(make_context, settings, model, strategy="moi")
    assert model.calls == []  # refused before any answer is asked for


async def test_no_contexts_give_an_empty_decision(make_context, settings):
    model = script(ensemble={"answer": "yes", "pmids": []})
    ctx = make_context(model)
    update = await ensemble(
        {"question": QUESTION, "qtype": "yesno", "contexts": []}, Runtime(context=ctx)
    )
    assert update["decision"]["answers"] == [] and model.calls == []


async def test_factoid_synonyms_vote_together_and_cite_together(make_context, settings):
    said = [("IL-6", "101"), ("IL6", "102"), ("TNF", "103"), ("tumor necrosis factor", "103")]
    replies = iter([*said, ("IL 6", "105")])

    def reply(messages, kwargs):
        answer, pmid = next(replies)
        return {"answer": answer, "pmids": [pmid]}

    model = script(ensemble=reply)
    update = await run(
        make_context, settings, model, qtype="factoid", strategy="permute_vote", members=5
    )
    table = update["votes"]["table"]
    assert table[0]["votes"] == 3 and set(table[0]["variants"]) >= {"IL-6", "IL 6"}
    assert table[1]["votes"] == 2  # TNF and its expansion are one candidate
    answers = update["decision"]["answers"]
    assert set(answers[0]["cited"]) == {"101", "102", "105"} and answers[1]["cited"] == ["103"]


@pytest.mark.parametrize(
    ("strategy", "changes", "k", "m"),
    [
        ("single", {"contexts": 3}, 1, 3),
        ("self_consistency", {"members": 2, "contexts": 3}, 2, 3),
        ("permute_vote", {"members": 3, "contexts": 4}, 3, 4),
        ("cobag", {"cobag": {"members": 3, "contexts": 4, "core": 2, "pool": 6}}, 3, 4),
        ("ccv", {"ccv": {"members": 3, "contexts": 5}}, 3, 5),
    ],
)
async def test_the_decision_records_k_m_and_which_abstracts_reached_the_members(
    make_context, settings, strategy, changes, k, m
):
    # Issue 26: the trace shows which reranked abstracts reached the members (`shown`) and
    # which reach synthesis (the decision's order), with the K and m the strategy ran with.
    model = script(ensemble={"answer": "yes", "pmids": [], "passage": 1, "quote": "q"})
    update = await run(make_context, settings, model, strategy=strategy, **changes)
    recorded = update["decision"]["settings"]
    assert (recorded["members"], recorded["contexts"]) == (k, m)
    assert len({m_["view"] for m_ in update["members"]}) == k
    seen = {p for member in update["members"] for p in member["order"]}
    assert set(recorded["shown"]) == seen
    assert recorded["shown"] == [p for p in PMIDS if p in seen]  # in rank order
    assert set(update["decision"]["order"]) <= seen
