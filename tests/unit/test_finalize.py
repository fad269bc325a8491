"""finalize never presents an empty answer as a result: it says why, and flags it."""

import pytest
from langgraph.runtime import Runtime

from nodes.finalize import finalize
from nodes.records import ALL_FAILED, model_failed

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


def call(node, raw, error, endpoint="http://127.0.0.1:9/v1"):
    return {"node": node, "model": "m", "raw": raw, "error": error, "endpoint": endpoint}


async def test_an_insufficient_yesno_gives_no_exact_answer(make_context, index):
    failed = {"model": "m", "answer": [], "pmids": [], "error": "Connection error."}
    empty = {"exact": [], "ideal": "", "confidence": 0.0, "cited": []}
    result = await run(make_context, state(index, "yesno", empty, members=[failed]))
    assert result["insufficient"] is True
    assert result["exact_answer"] is None  # never the "no" an empty answer would be shaped as


async def test_no_parseable_reply_from_members_or_synthesis_is_a_model_failure(make_context, index):
    junk = "][{" + "x" * 200
    failed = {"model": "m", "answer": [], "pmids": [], "error": "unparseable output: ][{"}
    calls = [
        call("generate_query", "{}", None),  # a query call that parsed answers nothing
        call("ensemble", junk, "unparseable output: ][{"),
        call("ensemble", junk, "unparseable output: ][{"),
        call("synthesize", "", "unparseable output: empty", endpoint="local model"),
    ]
    empty = {"exact": [], "ideal": "", "confidence": 0.0, "cited": []}
    s = state(index, "yesno", empty, members=[failed, failed], calls=calls)
    result = await run(make_context, s)
    assert result["failed"] is True and result["insufficient"] is True
    assert model_failed(result) and result["exact_answer"] is None
    reason = result["insufficient_reason"]
    assert reason.startswith(ALL_FAILED)
    assert f"ensemble: http://127.0.0.1:9/v1 returned {junk[:80]!r}" in reason
    assert junk[:81] not in reason  # the first 80 characters, no more
    assert reason.count("ensemble: ") == 1  # each endpoint and role named once
    assert "synthesis: local model returned ''" in reason


@pytest.mark.parametrize("parsed", ["ensemble", "synthesize"])
async def test_one_role_answering_is_not_a_model_failure(make_context, index, parsed):
    calls = [
        call(node, "{}", None) if node == parsed else call(node, "][{", "unparseable output")
        for node in ("ensemble", "synthesize")
    ]
    empty = {"exact": [], "ideal": "", "confidence": 0.0, "cited": []}
    result = await run(make_context, state(index, "yesno", empty, calls=calls))
    assert result["failed"] is False and not model_failed(result)
    assert result["insufficient"] is True and result["exact_answer"] is None


def test_a_result_kept_before_failed_existed_reads_by_its_reason():
    old = {"insufficient": True, "insufficient_reason": f"{ALL_FAILED} (last error: 429)"}
    assert model_failed(old)
    assert not model_failed({"insufficient": True, "insufficient_reason": "no passage says"})
