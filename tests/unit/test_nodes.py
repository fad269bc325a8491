"""Each node on its own, with a scripted chat model, the hash embedder and a real tantivy index."""

import json

import pytest
from langgraph.runtime import Runtime

from graphs.describe import done_line, trace_text
from infra.search.fusion import fuse
from nodes.ensemble import ensemble
from nodes.fallback_search import fallback_search
from nodes.finalize import finalize
from nodes.generate_query import generate_query
from nodes.organize import organize
from nodes.refine_query import refine_query
from nodes.rerank import rerank
from nodes.search import search
from nodes.synthesize import synthesize
from tests.support.data import LIMITS
from tests.support.fakes import ScriptedReranker, pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"


def ctx_runtime(make_context, model=None, **kw):
    return Runtime(context=make_context(model, **kw))


async def test_generate_query_uses_a_valid_model_query(make_context):
    rt = ctx_runtime(make_context, script(query={"query": "mitochondria AND lace"}))
    update = await generate_query({"question": QUESTION}, rt)
    assert update["query"] == "mitochondria AND lace"
    assert update["qtype"] == "yesno" and update["qtype_source"] == "detected"
    assert update["queries"] == [
        {"query": "mitochondria AND lace", "source": "model", "error": None}
    ]
    assert update["limits"]["min_hits"] == 5


async def test_generate_query_keeps_a_given_type(make_context):
    rt = ctx_runtime(make_context, script(query={"query": "lace"}))
    update = await generate_query({"question": QUESTION, "qtype": "summary"}, rt)
    assert update["qtype"] == "summary" and update["qtype_source"] == "given"


async def test_generate_query_repairs_with_the_error_fed_back(make_context):
    model = script(
        query={"query": "*itochondria AND lace"}, repair={"query": "mitochondria AND lace"}
    )
    update = await generate_query({"question": QUESTION}, ctx_runtime(make_context, model))
    assert update["query"] == "mitochondria AND lace"
    assert [q["source"] for q in update["queries"]] == ["model", "repair"]
    assert "leading wildcards" in update["queries"][0]["error"]
    repair_prompt = model.calls[1]["messages"][-1].content
    assert "*itochondria AND lace" in repair_prompt and "leading wildcards" in repair_prompt


async def test_generate_query_falls_back_to_keywords_after_two_failures(make_context):
    model = script(query={"query": "title:(a OR"})
    update = await generate_query({"question": QUESTION}, ctx_runtime(make_context, model))
    assert [q["source"] for q in update["queries"]] == ["model", "repair", "keywords"]
    assert update["queries"][-1]["error"] is None
    assert "mitochondria" in update["query"] and " OR " in update["query"]
    assert any("failed validation twice" in n for n in update["notes"])
    assert len(update["calls"]) == 2


async def test_generate_query_survives_unparseable_model_output(make_context):
    update = await generate_query(
        {"question": QUESTION}, ctx_runtime(make_context, script(query="not json"))
    )
    assert update["queries"][0]["error"].startswith("unparseable output")
    assert update["queries"][-1]["source"] == "keywords"


@pytest.mark.parametrize("copy", [QUESTION, QUESTION.rstrip("?").lower(), "  " + QUESTION[:-1]])
async def test_a_query_that_copies_the_question_is_a_failure_then_the_keywords(make_context, copy):
    model = script(query={"query": copy})
    update = await generate_query({"question": QUESTION}, ctx_runtime(make_context, model))
    assert [q["source"] for q in update["queries"]] == ["model", "keywords"]
    assert update["queries"][0]["error"].startswith("the query is the question copied")
    assert update["query"] == update["queries"][-1]["query"]
    assert " do " not in f" {update['query'].lower()} " and "mitochondria" in update["query"]
    assert any("copied the question" in n for n in update["notes"])
    assert len(update["calls"]) == 1  # no repair asked of a copy
    line = done_line("generate_query", update)
    assert line.startswith("the model's query failed (the query is the question copied")


async def test_a_keyword_query_of_the_question_s_own_words_is_not_a_copy(make_context):
    model = script(query={"query": "mitochondria AND lace AND plant"})
    update = await generate_query({"question": QUESTION}, ctx_runtime(make_context, model))
    assert update["queries"] == [
        {"query": "mitochondria AND lace AND plant", "source": "model", "error": None}
    ]
    assert done_line("generate_query", update) == "query written"


async def test_search_returns_candidates_and_total(make_context):
    update = await search({"query": "mitochondria"}, ctx_runtime(make_context))
    pmids = [p for p, _ in update["candidates"]]
    assert update["hits"] == len(pmids) >= 3 and "101" in pmids
    scores = [s for _, s in update["candidates"]]
    assert scores == sorted(scores, reverse=True)
    assert update["searches"][0]["backend"] == "embedded"


async def test_search_caps_candidates(make_context, settings):
    capped = settings.model_copy(
        update={"search": settings.search.model_copy(update={"max_candidates": 2})}
    )
    update = await search(
        {"query": "plant OR leaves OR cell"}, Runtime(context=make_context(settings_=capped))
    )
    assert len(update["candidates"]) == 2 and update["hits"] > 2


def refine_state(refinements: int) -> dict:
    """A state after one zero-hit search of the query already tried."""
    query = "mitochondria AND aspirin"
    return {
        "question": QUESTION,
        "query": query,
        "hits": 0,
        "limits": LIMITS,
        "queries": [{"query": query}],
        "refinements": refinements,
    }


async def test_refine_query_takes_a_new_valid_model_query(make_context):
    model = script(refine={"query": "mitochondria OR mitochondrial"})
    state = refine_state(refinements=0)
    update = await refine_query(state, ctx_runtime(make_context, model))
    assert update["query"] == "mitochondria OR mitochondrial" and update["refinements"] == 1
    assert "found 0 articles; at least 5" in model.calls[0]["messages"][-1].content


async def test_refine_query_relaxes_deterministically_when_the_model_repeats_itself(make_context):
    model = script(refine={"query": "mitochondria AND aspirin"})
    state = refine_state(refinements=1)
    update = await refine_query(state, ctx_runtime(make_context, model))
    assert update["queries"][0]["error"] == "the same query was already tried"
    assert update["queries"][1]["source"] == "keywords" and " OR " in update["query"]
    assert update["refinements"] == 2


def test_fuse_interpolates_minmax_scores():
    import numpy as np

    bm25, cosine = np.array([10.0, 5.0, 0.0]), np.array([0.0, 1.0, 0.5])
    assert fuse(bm25, cosine, "interpolate", 0.5, 60).tolist() == [0.5, 0.75, 0.25]
    assert fuse(bm25, cosine, "cosine", 0.5, 60).tolist() == cosine.tolist()
    rrf = fuse(bm25, cosine, "rrf", 0.5, 60)
    assert rrf[1] > rrf[0] > rrf[2]


async def test_rerank_uses_stored_vectors_and_keeps_top_k(make_context, settings):
    candidates = [("107", 9.0), ("101", 3.0), ("102", 2.0), ("106", 1.0)]
    small = settings.model_copy(
        update={"rerank": settings.rerank.model_copy(update={"top_k": 3, "contexts": 2})}
    )
    update = await rerank(
        {"question": "mitochondria lace plant programmed cell death", "candidates": candidates},
        Runtime(context=make_context(settings_=small)),
    )
    ranked = [p for p, _ in update["ranked"]]
    assert (
        len(ranked) == 3 and ranked[0] == "101"
    )  # cosine lifts the on-topic document over BM25's top
    assert [c["pmid"] for c in update["contexts"]] == ranked[:2]
    assert update["contexts"][0]["abstract"].startswith("Mitochondrial dynamics")


@pytest.mark.parametrize(
    ("weight", "head"),
    [(0.0, ["101", "102", "103"]), (0.5, ["102", "101", "103"]), (1.0, ["103", "102", "101"])],
)
async def test_rerank_blends_the_cross_encoder_score_into_the_head(
    make_context, settings, weight, head
):
    candidates = [("101", 9.0), ("102", 8.0), ("103", 1.0), ("106", 0.5)]
    plain = settings.model_copy(update={"rerank": settings.rerank.model_copy(update={"alpha": 0})})
    state = {"question": "mitochondria lace plant", "candidates": candidates}
    first = await rerank(state, Runtime(context=make_context(settings_=plain)))
    assert [p for p, _ in first["ranked"][:3]] == ["101", "102", "103"]  # alpha 0: BM25 alone
    ce = plain.rerank.cross_encoder.model_copy(update={"top_n": 3, "weight": weight})
    blended = plain.model_copy(
        update={"rerank": plain.rerank.model_copy(update={"cross_encoder": ce})}
    )
    ctx = make_context(settings_=blended)
    docs = {d["pmid"]: d for d in ctx.search.fetch(["101", "102", "103"])}
    words = {p: docs[p]["title"] for p in docs}
    ctx.reranker = ScriptedReranker({words["103"]: 3.0, words["102"]: 2.0, words["101"]: 0.0})
    update = await rerank(state, Runtime(context=ctx))
    assert [p for p, _ in update["ranked"][:3]] == head
    assert update["ranked"][3][0] == "106"  # below the head, the first stage's order
    scores = [s for _, s in update["ranked"][:3]]
    assert scores == sorted(scores, reverse=True)


async def test_rerank_embeds_fallback_documents(make_context):
    pool = {
        "999": {
            "pmid": "999",
            "title": "Mitochondria in lace plant cell death",
            "abstract": "Mitochondria lace.",
        }
    }
    update = await rerank(
        {"question": "mitochondria lace plant", "candidates": [("106", 5.0)], "pool": pool},
        ctx_runtime(make_context),
    )
    assert {p for p, _ in update["ranked"]} == {"106", "999"}
    assert any(
        c["pmid"] == "999" and c["title"].startswith("Mitochondria") for c in update["contexts"]
    )


async def test_organize_drops_a_verified_duplicate_and_rejects_an_unverified_one(
    make_context, index
):
    contexts = index.fetch(["101", "108", "106"])
    model = script(
        organize={"duplicates": [{"index": 2, "same_as": 1}, {"index": 3, "same_as": 1}]}
    )
    update = await organize(
        {"question": QUESTION, "contexts": contexts}, ctx_runtime(make_context, model)
    )
    assert [c["pmid"] for c in update["organized"]] == ["101", "106"]
    labels = {(r["a"], r["b"]): r["applied"] for r in update["relations"]}
    assert labels == {("101", "108"): True, ("101", "106"): False}


async def test_ensemble_runs_every_model_on_every_view_and_votes(make_context, index):
    contexts = index.fetch(["101", "102", "103", "105"])
    yes = script(ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]})
    no = script(ensemble={"answer": "no", "pmids": []})
    no.model_name = "other"
    update = await ensemble(
        {"question": QUESTION, "qtype": "yesno", "organized": contexts},
        ctx_runtime(make_context, ensemble=[yes, yes.model_copy(), no]),
    )
    assert len(update["members"]) == 15  # 3 models x K=5 views
    assert update["votes"]["ranked"] == ["yes"] and update["votes"]["agreement"] == pytest.approx(
        10 / 15, abs=1e-3
    )
    orders = {tuple(m["order"]) for m in update["members"]}
    assert len(orders) == 5 and ("101", "102", "103", "105") in orders
    assert all(call["kwargs"].get("temperature") == 0.0 for call in no.calls)  # greedy


async def test_a_failing_member_is_dropped_not_fatal(make_context, index, settings):
    contexts = index.fetch(["101", "102", "103"])
    flaky = script(ensemble=RuntimeError("endpoint down"))
    good = script(ensemble={"answer": "CFTR", "pmids": ["101"]})
    # No reply cache: both scripted models share a spec, so the good one's cached greedy replies
    # would answer for the flaky one whenever it asked a view later (a race under load).
    uncached = settings.model_copy(
        update={"models": settings.models.model_copy(update={"cache": "off"})}
    )
    update = await ensemble(
        {"question": "Which gene?", "qtype": "factoid", "organized": contexts},
        ctx_runtime(make_context, ensemble=[good, flaky], settings_=uncached),
    )
    assert sum(m["error"] is not None for m in update["members"]) == 5
    assert update["votes"]["ranked"] == ["CFTR"]
    assert update["decision"]["answers"] == [{"answer": "CFTR", "support": 5.0, "cited": ["101"]}]
    assert any("5 of 10 member(s) failed" in n for n in update["notes"])


async def test_synthesize_cites_only_context_pmids_and_records_the_attempt(make_context, index):
    contexts = index.fetch(["101", "102"])
    model = script(
        synthesize={
            "exact_answer": "yes",
            "ideal_answer": "Yes, mitochondria change early in lace plant programmed cell death.",
            "confidence": 0.8,
            "cited_pmids": ["101"],
            "rationale": "Both abstracts report mitochondrial changes.",
        }
    )
    state = {
        "question": QUESTION,
        "qtype": "yesno",
        "organized": contexts,
        "decision": {
            "strategy": "permute_vote",
            "answers": [{"answer": "yes", "support": 3.0, "cited": ["101"]}],
            "order": ["101", "102"],
            "why": "3 of 3 members answered 'yes' (majority vote)",
            "settings": {},
            "source": "ensemble",
        },
    }
    update = await synthesize(state, ctx_runtime(make_context, model))
    support = update["answer"].pop("support")
    assert support["verdict"] == "supported" and support["kept"] == ["yes"]
    assert update["answer"] == {
        "extracted": ["yes"],
        "exact": ["yes"],
        "ideal": "Yes, mitochondria change early in lace plant programmed cell death.",
        # The model's 0.8, which the evidence allows (every decided vote, its citation on the
        # question and backed), capped at 0.5: no model other than its author judged it.
        "confidence": 0.5,
        "model_confidence": 0.8,
        "confidence_parts": {
            "model": 0.8,
            "answered": 1.0,
            "agreement": 1.0,
            "on_question": 1.0,
            "citations": 1.0,
            "supported": 1.0,
            "evidence": 1.0,
            "judge": "none",
            "capped": True,
            "recited": False,
        },
        "cited": ["101"],
        "rationale": "Both abstracts report mitochondrial changes.",
        "source": "synthesis",
        "overrode_decision": False,
    }
    assert update["attempts"][0]["temperature"] == 0.1  # the BioASQ ensemble paper's first try
    assert 'Ensemble decision: "yes"' in model.calls[0]["messages"][-1].content


async def test_synthesize_removes_and_records_a_citation_it_was_not_shown(make_context, index):
    contexts = index.fetch(["101"])
    model = script(
        synthesize={
            "exact_answer": "yes",
            "ideal_answer": "Yes, mitochondria play a role in lace plant programmed cell death.",
            "confidence": 0.9,
            "cited_pmids": ["555", "101"],
        }
    )
    state = {
        "question": QUESTION,
        "qtype": "yesno",
        "organized": contexts,
    }
    update = await synthesize(state, ctx_runtime(make_context, model))
    assert update["answer"]["source"] == "synthesis" and update["answer"]["cited"] == ["101"]
    assert update["notes"] == ["synthesize: removed citation(s) of PMIDs not in its context: 555"]
    # The schema still offers only the PMIDs shown, so constrained decoders cannot stray.
    schema = json.dumps(model.calls[0]["messages"][0].content)
    assert '\\"enum\\": [\\"101\\"]' in schema


async def test_second_synthesis_in_a_round_is_greedy(make_context, index):
    model = script(
        synthesize={
            "exact_answer": "no",
            "ideal_answer": "No.",
            "confidence": 0.7,
            "cited_pmids": [],
        }
    )
    state = {
        "question": QUESTION,
        "qtype": "yesno",
        "organized": index.fetch(["101"]),
        "attempts": [{"round": 0, "temperature": 0.1, "answer": {}, "error": None}],
    }
    update = await synthesize(state, ctx_runtime(make_context, model))
    assert update["attempts"][0]["temperature"] == 0.0
    assert model.calls[0]["kwargs"]["temperature"] == 0.0


async def test_fallback_without_client_records_unavailable(make_context):
    update = await fallback_search(
        {"question": QUESTION, "query": "lace"}, ctx_runtime(make_context)
    )
    assert update["fallbacks"][0]["status"].startswith("fallback unavailable")
    assert update["fallbacks"][0]["added"] == 0


class _PubMed:
    """A PubMed client that records the term and answers as told."""

    def __init__(self, error=None):
        self.terms, self.error = [], error

    async def search(self, term, retmax=20):
        self.terms.append(term)
        if self.error:
            raise self.error
        return []


@pytest.mark.parametrize(
    ("query", "term"),
    [
        ("Is mitochondria for lace", "mitochondria[tiab] OR lace[tiab]"),
        ('"cell death" AND the', '"cell death"[tiab]'),
        ("is OR for OR the", None),  # nothing but stop words: the question's keywords
    ],
)
async def test_the_fallback_searches_pubmed_without_stop_words(make_context, query, term):
    pubmed = _PubMed()
    await fallback_search(
        {"question": QUESTION, "query": query}, ctx_runtime(make_context, pubmed=pubmed)
    )
    (sent,) = pubmed.terms
    for stop in ("is[tiab]", "for[tiab]", "the[tiab]"):
        assert stop not in sent
    if term is not None:
        assert sent == term
    else:
        assert "mitochondria[tiab]" in sent


async def test_pubmed_unavailable_is_said_so_in_the_progress_line(make_context):
    from infra.pubmed import FallbackUnavailable

    pubmed = _PubMed(FallbackUnavailable("cannot reach PubMed"))
    update = await fallback_search(
        {"question": QUESTION, "query": "lace"}, ctx_runtime(make_context, pubmed=pubmed)
    )
    line = done_line("fallback_search", update)
    assert line.startswith("PubMed unavailable (cannot reach PubMed)")
    assert "0 documents added" not in line


async def test_finalize_keeps_retrieval_order_and_shows_cited_evidence_beside_it(
    make_context, index
):
    contexts = index.fetch(["101", "102", "103"])
    state = {
        "question": QUESTION,
        "qtype": "factoid",
        "contexts": contexts,
        "organized": contexts,
        "ranked": [("101", 0.9), ("102", 0.8), ("103", 0.7)],
        "answer": {
            "exact": ["cytochrome c", "Cytochrome C", "caspase"],
            "ideal": "Cytochrome c is released first.",
            "confidence": 0.6,
            "cited": ["103", "777"],
        },
    }
    result = (await finalize(state, ctx_runtime(make_context)))["result"]
    assert result["exact_answer"] == [["cytochrome c"], ["caspase"]]
    # Retrieved documents in retrieval order, never re-ordered by what the answer cites.
    assert result["documents"] == ["101", "102", "103"]
    assert result["insufficient"] is False and result["confidence"] == 0.6
    [cited] = result["evidence"]  # the unknown citation 777 dropped
    doc = contexts[2]
    assert cited["pmid"] == "103" and cited["title"] == doc["title"]
    section = doc[cited["section"]]
    assert section[cited["offset"] : cited["offset"] + len(cited["sentence"])] == cited["sentence"]
    for snippet in result["snippets"]:
        doc = next(c for c in contexts if snippet["document"].endswith("/" + c["pmid"]))
        section = doc[snippet["beginSection"]]
        assert (
            section[snippet["offsetInBeginSection"] : snippet["offsetInEndSection"]]
            == snippet["text"]
        )


def relation_by_text(messages, kwargs):
    """Label pairs from their text: the two cyclosporin reports duplicate; 101 and 103 conflict."""
    text = messages[-1].content
    first = text.split("Passage 1:")[1].split("Passage 2:")[0].strip()
    second = text.split("Passage 2:")[1].strip()
    triple = {"answer": "yes", "entity": "mitochondria", "descriptor": "lace plant"}
    if "Cyclosporin A" in first and "Cyclosporin A" in second:
        label = "duplicated"
    elif "Lace plant leaf perforation" in second and "Mitochondria drive" in first:
        label = "counterfactual"
    else:
        label = "none"
    return {"first": triple, "second": triple, "label": label}


async def test_organize_with_corg_groups_and_answers_each_group(make_context, settings, index):
    # organize.corg_answers "organize": the paper's aggregator answers each group here.
    chosen = {"strategy": "corg", "corg_answers": "organize"}
    corg = settings.model_copy(update={"organize": settings.organize.model_copy(update=chosen)})
    model = script(
        relation=relation_by_text,
        pluralize={"question": "What roles do mitochondria play in lace plant cell death?"},
        group=lambda m, kw: {
            "answer": "Answer for " + ",".join(pmids_in(m)),
            "cited_pmids": pmids_in(m)[:1],
        },
    )
    contexts = index.fetch(["101", "108", "103", "106"])
    update = await organize(
        {"question": QUESTION, "contexts": contexts},
        Runtime(context=make_context(model, settings_=corg)),
    )
    assert [c["pmid"] for c in update["organized"]] == ["101", "103", "106"]  # 108 duplicates 101
    groups = {tuple(g["pmids"]): g for g in update["groups"]}
    assert set(groups) == {("101", "106"), ("103",)}  # the counterfactual pair is split
    assert groups[("101", "106")]["question"].startswith("What roles")  # plural form for a group
    assert groups[("103",)]["question"] == QUESTION
    assert groups[("103",)]["answer"] == "Answer for 103" and groups[("103",)]["cited"] == ["103"]
    graph = update["relation_graph"]
    assert graph["calls"] < graph["naive_calls"] == 6
    assert any(r["mirrored"] for r in update["relations"])
    assert update["triples"]["101"]["descriptor"] == "lace plant"
    relation_calls = [
        c for c in model.calls if any("You compare two PubMed" in m.content for m in c["messages"])
    ]
    assert len(relation_calls) == graph["calls"]
    # What `quorum trace show` prints of it: the strategy, every edge with how it was known, then
    # the groups.
    lines = trace_text("organize", update)[0]
    assert lines[0] == "strategy corg (organize.strategy 'corg')"
    assert lines[1].startswith(f"relation graph: 4 contexts, {graph['calls']} relation calls for 6")
    assert sum("~" in line for line in lines) == 6
    assert any("(mirrored via [1] 101)" in line for line in lines)
    assert "group 2: 103" in lines and "  answer: Answer for 103 [103]" in lines


async def test_synthesis_sees_every_group_answer(make_context, index):
    model = script(
        synthesize={
            "exact_answer": "yes",
            "ideal_answer": "x",
            "confidence": 0.9,
            "cited_pmids": [],
        }
    )
    state = {
        "question": QUESTION,
        "qtype": "yesno",
        "organized": index.fetch(["101", "103"]),
        "groups": [
            {"pmids": ["101"], "answer": "Yes, in lace plants.", "cited": ["101"]},
            {"pmids": ["103"], "answer": "No, not in leaves.", "cited": []},
        ],
    }
    await synthesize(state, ctx_runtime(make_context, model))
    prompt = model.calls[0]["messages"][-1].content
    assert '"Yes, in lace plants.", ["101"]' in prompt and '"No, not in leaves.", ["103"]' in prompt


@pytest.mark.parametrize(
    ("strategy", "expected"), [("base", 1), ("separate", 3), ("random", 2), ("kmeans", 2)]
)
async def test_organize_ablations_answer_each_group_without_relation_calls(
    make_context, settings, index, strategy, expected
):
    chosen = settings.model_copy(
        update={
            "organize": settings.organize.model_copy(update={"strategy": strategy, "groups": 2})
        }
    )
    model = script(
        pluralize={"question": "What roles do mitochondria play?"},
        group=lambda m, kw: {"answer": "a", "cited_pmids": pmids_in(m)[:1]},
    )
    contexts = index.fetch(["101", "103", "106"])
    update = await organize(
        {"question": QUESTION, "contexts": contexts},
        Runtime(context=make_context(model, settings_=chosen)),
    )
    assert len(update["groups"]) == expected
    assert sorted(p for g in update["groups"] for p in g["pmids"]) == ["101", "103", "106"]
    assert not any(
        any("You compare two PubMed" in m.content for m in c["messages"]) for c in model.calls
    )
