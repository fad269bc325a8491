"""search.query_mode 'question': phase A with the question as the query and no model call."""

from __future__ import annotations

import pytest
from langgraph.runtime import Runtime

from graphs.qa import build_graph
from nodes.generate_query import generate_query, question_query
from nodes.refine_query import refine_query
from nodes.search import search
from tests.support.fakes import script


def question_mode(settings, **search):
    group = settings.search.model_copy(update={"query_mode": "question", **search})
    return settings.model_copy(update={"search": group})


@pytest.fixture
def model():
    """A model that answers anything: every call it gets is recorded, and none is expected."""
    return script(query={"query": "aspirin"}, refine={"query": "aspirin"})


@pytest.mark.parametrize(
    "question",
    [
        "Do mitochondria play a role in lace plant (Aponogeton) cell death?",
        'Is NOT "title:aspirin" AND (statin OR [mesh]) a query^3 ~2 * /regex/ \\ ?',
        "What is the role of IL-6 in sepsis: a review?",
        "Which genes? {}<>=+&|!",
    ],
)
async def test_any_question_becomes_a_query_the_engine_accepts(make_context, settings, question):
    ctx = make_context(settings_=question_mode(settings))
    query = question_query(question)
    assert query
    ctx.search.validate(query)  # raises QueryError when the language refuses it
    assert "NOT" not in query.split() and "AND" not in query.split()


async def test_generate_query_uses_the_question_and_calls_no_model(make_context, settings, model):
    ctx = make_context(model, settings_=question_mode(settings))
    question = "Do mitochondria play a role in remodelling lace plant leaves?"
    update = await generate_query({"question": question}, Runtime(context=ctx))
    assert update["query"] == question_query(question)
    assert update["queries"] == [{"query": update["query"], "source": "question", "error": None}]
    assert update["calls"] == [] and model.calls == []
    assert update["qtype"] == "yesno"
    found = await search({"question": question, **update}, Runtime(context=ctx))
    assert found["hits"] > 0 and found["candidates"][0][0] in {"101", "103", "108"}


async def test_a_question_without_words_is_recorded_not_raised(make_context, settings, model):
    ctx = make_context(model, settings_=question_mode(settings))
    update = await generate_query({"question": "?!"}, Runtime(context=ctx))
    assert update["query"] == "" and update["queries"][0]["error"]
    assert model.calls == []


async def test_refine_relaxes_by_rule_without_a_model(make_context, settings, model):
    ctx = make_context(model, settings_=question_mode(settings))
    state = {
        "question": "mitochondria lace plant",
        "query": "mitochondria AND lace AND plant",
        "queries": [{"query": "mitochondria AND lace AND plant", "source": "question"}],
        "hits": 0,
        "limits": {"min_hits": 5},
    }
    update = await refine_query(state, Runtime(context=ctx))
    assert update["query"] == "mitochondria OR lace OR plant"
    assert update["refinements"] == 1 and "calls" not in update and model.calls == []


async def test_phase_a_runs_end_to_end_without_any_model_call(make_context, settings, model, index):
    ctx = make_context(model, settings_=question_mode(settings, dense_candidates=3))
    graph = build_graph(phase="A")
    out = await graph.ainvoke(
        {"question": "Do mitochondria play a role in lace plant programmed cell death?"},
        context=ctx,
    )
    result = out["result"]
    assert model.calls == []
    assert result["documents"][0] in {"101", "102", "103", "108"}
    assert result["snippets"]
    for snippet in result["snippets"]:
        doc = index.fetch([snippet["document"].rsplit("/", 1)[-1]])[0]
        section = doc[snippet["beginSection"]]
        begin, end = snippet["offsetInBeginSection"], snippet["offsetInEndSection"]
        assert section[begin:end] == snippet["text"]
    assert not result["insufficient"]
