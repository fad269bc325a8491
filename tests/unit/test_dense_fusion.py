"""The dense first stage in rerank: nearest documents join BM25's candidates, counted per source."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graphs.describe import done_line
from graphs.eval.retrieval import evaluate_retrieval
from infra.bioasq.formats import Question
from nodes.rerank import rerank

QUESTION = "mitochondria lace plant programmed cell death"


def with_dense(settings, k: int, **rerank_settings):
    search = settings.search.model_copy(update={"dense_candidates": k})
    rerank_group = settings.rerank.model_copy(update=rerank_settings)
    return settings.model_copy(update={"search": search, "rerank": rerank_group})


async def test_off_by_default_the_candidates_are_bm25s_alone(make_context, settings):
    update = await rerank(
        {"question": QUESTION, "candidates": [("106", 5.0), ("107", 4.0)]},
        Runtime(context=make_context(settings_=settings)),
    )
    assert {p for p, _ in update["ranked"]} == {"106", "107"}
    assert update["first_stage"] == {"bm25": 2, "dense": 0, "both": 0, "dense_only": 0, "pool": 0}


async def test_a_document_bm25_missed_is_found_by_vector_and_ranked_first(
    make_context, settings, index, embedder
):
    # BM25 found only off-topic documents; the on-topic ones come from the dense stage.
    nearest = [p for p, _ in index.nearest(embedder.embed_query(QUESTION), 3)]
    assert "101" in nearest and "106" not in nearest
    update = await rerank(
        {"question": QUESTION, "candidates": [("106", 5.0), ("107", 4.0)]},
        Runtime(context=make_context(settings_=with_dense(settings, 3))),
    )
    ranked = [p for p, _ in update["ranked"]]
    assert set(ranked) == {"106", "107", *nearest}
    assert ranked[0] == nearest[0]  # the best by cosine beats BM25's off-topic top hit
    assert update["first_stage"] == {"bm25": 2, "dense": 3, "both": 0, "dense_only": 3, "pool": 0}
    assert update["contexts"][0]["pmid"] == nearest[0] and update["contexts"][0]["abstract"]
    assert done_line("rerank", update).endswith("(3 documents found by vector alone)")


async def test_documents_both_stages_found_are_counted_once(
    make_context, settings, index, embedder
):
    nearest = [p for p, _ in index.nearest(embedder.embed_query(QUESTION), 4)]
    bm25 = [(nearest[0], 7.0), (nearest[1], 6.0), ("107", 1.0)]
    update = await rerank(
        {"question": QUESTION, "candidates": bm25},
        Runtime(context=make_context(settings_=with_dense(settings, 4))),
    )
    ranked = [p for p, _ in update["ranked"]]
    assert len(ranked) == len(set(ranked)) == 5
    assert update["first_stage"] == {"bm25": 3, "dense": 4, "both": 2, "dense_only": 2, "pool": 0}


async def test_with_no_bm25_hit_at_all_the_dense_stage_still_gives_contexts(make_context, settings):
    update = await rerank(
        {"question": QUESTION, "candidates": []},
        Runtime(context=make_context(settings_=with_dense(settings, 2, fusion="rrf"))),
    )
    assert len(update["ranked"]) == 2 and len(update["contexts"]) == 2
    assert update["first_stage"]["dense_only"] == 2


async def test_fallback_documents_are_not_added_twice(make_context, settings, index, embedder):
    best = index.nearest(embedder.embed_query(QUESTION), 1)[0][0]
    pool = {best: {**index.fetch([best])[0], "title": "from PubMed"}}
    update = await rerank(
        {"question": QUESTION, "candidates": [("107", 1.0)], "pool": pool},
        Runtime(context=make_context(settings_=with_dense(settings, 1))),
    )
    assert sorted(p for p, _ in update["ranked"]) == sorted(["107", best])
    assert update["first_stage"] == {"bm25": 1, "dense": 1, "both": 0, "dense_only": 0, "pool": 1}


async def test_eval_retrieval_measures_the_dense_stage(make_context, settings, index, embedder):
    # No word of this question is in the index: BM25 finds nothing, the vectors still point.
    body = "zyxwv qwertyuiop florpish"
    gold = index.nearest(embedder.embed_query(body), 1)[0][0]
    questions = [Question(id="q1", body=body, type="summary", documents=[gold])]
    off = await evaluate_retrieval(make_context(settings_=settings), questions)
    on = await evaluate_retrieval(make_context(settings_=with_dense(settings, 5)), questions)
    assert off["doc_recall@10"] == 0.0 and off["dense_candidates"] == 0
    assert on["doc_recall@10"] == 1.0 and on["doc_map"] == 1.0 and on["dense_candidates"] == 5
