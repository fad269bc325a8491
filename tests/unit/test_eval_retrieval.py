"""`quorum eval retrieval --cross-encoder-weights`: every weight ranked as rerank ranks it."""

import dataclasses

import pytest

from graphs.eval.retrieval import evaluate_retrieval, retrieve_scored
from infra.bioasq.formats import Question
from tests.support.fakes import ScriptedReranker

QUESTION = "mitochondria lace plant programmed cell death"


def at_weight(settings, weight, top_n=5):
    ce = settings.rerank.cross_encoder.model_copy(update={"top_n": top_n, "weight": weight})
    return settings.model_copy(
        update={"rerank": settings.rerank.model_copy(update={"cross_encoder": ce})}
    )


@pytest.fixture
async def planted(make_context, settings):
    """A question whose gold the first stage ranks third and the cross-encoder ranks first."""
    ranked, _, _ = await retrieve_scored(
        QUESTION, make_context(settings_=settings), query_mode="question", reranked=True
    )
    gold = ranked[2]
    title = make_context(settings_=settings).search.fetch([gold])[0]["title"]
    question = Question(id="q1", body=QUESTION, type="summary", documents=[gold])
    return question, ScriptedReranker({title: 5.0})


async def test_each_weight_scores_what_rerank_at_that_weight_gives(make_context, settings, planted):
    question, reranker = planted
    ctx = make_context(settings_=at_weight(settings, 0.5))
    ctx.reranker = reranker
    report = await evaluate_retrieval(ctx, [question], weights=[0.0, 1.0])
    rows = {row["weight"]: row for row in report["cross_encoder_weights"]}
    assert set(rows) == {0.0, 0.5, 1.0} and report["cross_encoder_weight"] == 0.5
    assert rows[0.0]["doc_map"] < rows[1.0]["doc_map"] == 1.0  # the planted order shows
    for weight, row in rows.items():
        alone = make_context(settings_=at_weight(settings, weight))
        alone.reranker = reranker
        plain = await evaluate_retrieval(alone, [question])
        assert (plain["doc_map"], plain["doc_recall@10"]) == (row["doc_map"], row["doc_recall@10"])
    assert report["doc_map"] == rows[0.5]["doc_map"]
    assert [r["weight"] for r in report["cross_encoder_weights"]][-1] == 0.0  # best first


async def test_a_sweep_without_a_cross_encoder_is_refused(make_context, settings, planted):
    question, _ = planted
    with pytest.raises(ValueError, match="cross_encoder"):
        await evaluate_retrieval(make_context(settings_=settings), [question], weights=[0.5])


async def test_snippet_recall_scores_the_snippets_finalize_would_choose(
    make_context, settings, planted, monkeypatch
):
    # `--snippets` once chose 2 a document from 10 documents while finalize chose by the
    # settings (5 a document from 5): the figure measured another choice than quorum's.
    import infra.snippets
    from infra.snippets import best_snippets

    question, _ = planted
    gold = question.documents[0]
    snippet = {"document": gold, "text": "mitochondria", "beginSection": "abstract"}
    question = dataclasses.replace(question, snippets=[snippet])
    chosen = settings.snippets.model_copy(
        update={"documents": 2, "limit": 3, "per_document": 1, "merge": False}
    )
    seen = []

    def spy(question_body, docs, embedder, **kwargs):
        seen.append((len(docs), kwargs))
        return best_snippets(question_body, docs, embedder, **kwargs)

    monkeypatch.setattr(infra.snippets, "best_snippets", spy)
    ctx = make_context(settings_=settings.model_copy(update={"snippets": chosen}))
    await evaluate_retrieval(ctx, [question], snippets=True)
    [(documents, kwargs)] = seen
    assert documents == 2
    assert (kwargs["limit"], kwargs["per_doc"], kwargs["merge"]) == (3, 1, False)
    assert kwargs["min_score"] == chosen.min_score
