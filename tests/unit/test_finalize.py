"""finalize never presents an empty answer as a result: it says why, and flags it."""

import pytest
from langgraph.runtime import Runtime

from nodes.finalize import finalize

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"


def state(index, qtype, answer, **more):
    contexts = index.fetch(["101", "102"])
    return {
        "question": QUESTION,
        "qtype": qtype,
        "contexts": contexts,
        "organized": contexts,
        "ranked": [("101", 0.9), ("102", 0.8)],
        "answer": answer,
        **more,
    }


async def run(make_context, s):
    return (await finalize(s, Runtime(context=make_context())))["result"]


async def test_a_summary_whose_model_gave_nothing_is_insufficient_with_the_reason(
    make_context, index
):
    s = state(
        index,
        "summary",
        {"exact": [], "ideal": "  ", "confidence": 0.0, "cited": [], "source": "vote"},
        attempts=[{"round": 0, "temperature": 0.1, "answer": {}, "error": "unparseable output"}],
    )
    result = await run(make_context, s)
    assert result["insufficient"] is True
    assert result["ideal_answer"] == (
        "Insufficient evidence: the ideal answer is empty (unparseable output)."
    )
    assert result["insufficient_reason"] == "the ideal answer is empty (unparseable output)"


@pytest.mark.parametrize("qtype", ["factoid", "list"])
async def test_an_empty_exact_answer_without_ideal_is_insufficient(make_context, index, qtype):
    s = state(index, qtype, {"exact": [], "ideal": "", "confidence": 0.0, "cited": []})
    result = await run(make_context, s)
    assert result["insufficient"] is True and result["ideal_answer"].startswith("Insufficient")


async def test_an_answer_with_text_is_not_insufficient(make_context, index):
    s = state(index, "summary", {"exact": [], "ideal": "Yes, they do.", "confidence": 0.8})
    result = await run(make_context, s)
    assert result["insufficient"] is False and result["insufficient_reason"] is None
    assert result["ideal_answer"] == "Yes, they do."


async def test_an_answer_nobody_in_the_ensemble_gave_is_insufficient_whatever_it_says(
    make_context, index
):
    failed = {"model": "m", "answer": [], "pmids": [], "error": "Connection error."}
    fluent = {"exact": ["yes"], "ideal": "Yes, it does so.", "confidence": 1.0, "cited": ["101"]}
    result = await run(make_context, state(index, "yesno", fluent, members=[failed] * 3))
    assert result["insufficient"] is True and result["confidence"] == 0.0
    assert result["insufficient_reason"].endswith("(last error: Connection error.)")
    assert result["evidence"] == []  # nothing rests on citations of an answer not given


async def test_junk_that_reached_finalize_is_still_not_an_answer(make_context, index):
    junk = {"exact": ["CFTR"], "ideal": "} {{", "confidence": 0.9, "cited": []}
    result = await run(make_context, state(index, "factoid", junk))
    assert result["insufficient"] is True and "not a sentence" in result["insufficient_reason"]


async def test_phase_a_answers_nothing_and_is_not_insufficient(make_context, index):
    s = state(index, "factoid", None)
    del s["answer"]
    result = await run(make_context, s)
    assert result["insufficient"] is False and result["ideal_answer"] == ""


def test_a_runaway_document_is_cut_to_what_the_state_keeps():
    from nodes.passages import MAX_ABSTRACT_CHARS, bounded

    doc = {"pmid": "1", "title": "t", "abstract": "word " * 100_000}
    kept = bounded(doc)
    assert len(kept["abstract"]) == MAX_ABSTRACT_CHARS
    assert doc["abstract"].startswith(kept["abstract"])  # a prefix: snippet offsets stay exact
    small = {"pmid": "2", "title": "t", "abstract": "short"}
    assert bounded(small) is small
