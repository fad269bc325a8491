"""The ensemble node's strategies with scripted members: views, calls, votes and diagnostics."""

import pytest
from langgraph.runtime import Runtime

from nodes.ensemble import StrategyUnavailable, ensemble
from tests.support.fakes import pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"
PMIDS = ["101", "102", "103", "105", "104", "106", "107", "108"]


def with_ensemble(settings, **changes):
    cobag = changes.pop("cobag", None)
    ensemble_settings = settings.ensemble.model_copy(update=changes)
    if cobag:
        ensemble_settings = ensemble_settings.model_copy(
            update={"cobag": settings.ensemble.cobag.model_copy(update=cobag)}
        )
    return settings.model_copy(update={"ensemble": ensemble_settings})


async def run(
    make_context, settings, model, qtype="yesno", pmids=PMIDS, ensemble_models=None, **ch
):
    ctx = make_context(model, ensemble=ensemble_models, settings_=with_ensemble(settings, **ch))
    contexts = ctx.search.fetch(pmids)
    state = {"question": QUESTION, "qtype": qtype, "organized": contexts}
    return await ensemble(state, Runtime(context=ctx))


async def test_single_makes_one_greedy_call_per_model_on_the_rank_order(make_context, settings):
    model = script(ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]})
    update = await run(make_context, settings, model, strategy="single", contexts=3)
    assert len(update["members"]) == 1 and len(model.calls) == 1
    assert update["members"][0]["order"] == PMIDS[:3]
    assert update["votes"]["strategy"] == "single" and update["votes"]["ranked"] == ["yes"]


async def test_self_consistency_samples_the_same_view(make_context, settings):
    replies = iter(["yes", "no", "yes", "yes"])
    model = script(ensemble=lambda m, kw: {"answer": next(replies), "pmids": []})
    update = await run(make_context, settings, model, strategy="self_consistency", members=4)
    assert {tuple(m["order"]) for m in update["members"]} == {tuple(PMIDS[:5])}
    assert all(c["kwargs"]["temperature"] == 1.0 for c in model.calls)
    assert len(model.calls) == 4  # sampled calls are never served from the cache
    assert update["votes"]["ranked"] == ["yes"] and update["votes"]["agreement"] == 0.75


async def test_cobag_views_keep_the_core_and_record_relevance(make_context, settings):
    model = script(ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]})
    update = await run(
        make_context,
        settings,
        model,
        strategy="cobag",
        cobag={"members": 4, "contexts": 5, "core": 2, "tau": 0.5},
    )
    relevance = update["votes"]["relevance"]
    assert set(relevance) == set(PMIDS)
    core = sorted(relevance, key=lambda p: (-relevance[p], PMIDS.index(p)))[:2]
    members = update["members"]
    assert len(members) == 4 and all(len(m["order"]) == 5 for m in members)
    assert all(set(core) <= set(m["order"]) for m in members)
    assert len({tuple(m["order"]) for m in members}) > 1  # bagged, not one view


async def test_cobag_breaks_a_tie_toward_the_most_relevant_view(make_context, settings):
    replies = iter(["yes", "no"])  # one vote each: a tie by construction
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
    assert update["votes"]["ranked"] == best["answer"]


async def test_ccv_votes_on_citations_not_strings(make_context, settings):
    # Three members say "CFTR", each citing another abstract; two say "ENaC" and both cite
    # PMID 102 wherever their view put it: CCV picks ENaC although CFTR has more votes.
    plan = iter(
        [("CFTR", "101"), ("CFTR", "103"), ("CFTR", "105"), ("ENaC", "102"), ("ENaC", "102")]
    )

    def reply(messages, kwargs):
        answer, pmid = next(plan)
        return {"answer": answer, "passage": pmids_in(messages).index(pmid) + 1, "quote": "q"}

    model = script(ensemble=reply)
    update = await run(
        make_context, settings, model, qtype="factoid", strategy="ccv", members=5, contexts=4
    )
    members = update["members"]
    assert all(m["pmids"] == [m["order"][m["passage"] - 1]] for m in members)  # index → PMID
    votes = update["votes"]
    assert votes["table"][0]["answer"] == "CFTR"  # what a plain majority would pick
    assert votes["ranked"][0] == "ENaC" and votes["ccv"]["winner"] == "enac"
    scores = {row["answer"]: (row["score"], row["pmid"]) for row in votes["ccv"]["table"]}
    assert scores == {"enac": (2, "102"), "cftr": (1, "101")}
    assert votes["citation_agreement"] == pytest.approx(2 / 5)


async def test_moi_is_refused_without_likelihoods(make_context, settings):
    model = script(ensemble={"answer": "yes", "pmids": []})
    with pytest.raises(StrategyUnavailable, match="prompt log-probabilities"):
        await run(make_context, settings, model, strategy="moi")
    assert model.calls == []  # refused before any answer is asked for


async def test_factoid_synonyms_vote_together(make_context, settings):
    replies = iter(
        [["IL-6"], ["interleukin 6", "IL6"], ["TNF"], ["tumor necrosis factor"], ["IL 6"]]
    )
    model = script(ensemble=lambda m, kw: {"answer": next(replies), "pmids": []})
    update = await run(
        make_context, settings, model, qtype="factoid", strategy="permute_vote", members=5
    )
    table = update["votes"]["table"]
    assert table[0]["votes"] == 3 and set(table[0]["variants"]) >= {"IL-6", "IL6", "IL 6"}
    assert table[1]["votes"] == 2  # TNF and its expansion are one candidate
