"""Replay a finished run from a node (with an edited state) and step through a run by hand."""

import pytest

from graphs.runtime import run_question
from graphs.traces.control import ReplayProblem, parse_edits, replay, step_through
from graphs.traces.read import node_updates
from tests.support.fakes import pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"
EDITED = "Do mitochondria play no role in lace plant programmed cell death?"
"""An edit the scripted synthesizer answers "no" to; on the passages' subject, as the support
check gives no answer from passages that do not address the question asked."""


def said(call):
    return " ".join(m.content for m in call["messages"])


def model(confidence=0.9):
    return script(
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]},
        synthesize=lambda m, kw: {
            "exact_answer": "no" if EDITED in said({"messages": m}) else "yes",
            "ideal_answer": "Mitochondria act early.",
            "confidence": confidence,
            "cited_pmids": pmids_in(m)[:1],
        },
    )


def count(calls, marker):
    return sum(marker in said(c) for c in calls)


async def test_replay_from_synthesize_reuses_everything_before_it(make_context, settings):
    scripted = model()
    ctx = make_context(scripted)
    thread, first = await run_question(settings, QUESTION, context=ctx)
    before = len(scripted.calls)
    original = node_updates(settings, thread)
    new_thread, result = await replay(settings, ctx, thread, "synthesize")
    made = scripted.calls[before:]
    assert count(made, "You write PubMed search queries") == 0  # no new query
    assert count(made, "You answer biomedical questions") == 0  # no new ensemble members
    assert count(made, "You are the final judge") >= 1  # synthesis ran again
    assert new_thread != thread and result["exact_answer"] == first["exact_answer"]
    assert node_updates(settings, thread) == original  # the original is untouched
    steps = [s["node"] for s in node_updates(settings, new_thread)]
    assert steps[0] == "synthesize" and steps[-1] == "finalize"


async def test_replay_with_an_edited_field_changes_the_outcome(make_context, settings):
    ctx = make_context(model())
    thread, _ = await run_question(settings, QUESTION, context=ctx)
    edits = parse_edits([f'question="{EDITED}"'])
    _, result = await replay(settings, ctx, thread, "synthesize", edits)
    assert result["exact_answer"] == "no" and result["question"] == EDITED


async def test_replay_from_the_query_is_a_fresh_run_with_an_edited_query(make_context, settings):
    scripted = model()
    ctx = make_context(scripted)
    thread, _ = await run_question(settings, QUESTION, context=ctx)
    new_thread, _ = await replay(settings, ctx, thread, "search", {"query": "aspirin"})
    searches = node_updates(settings, new_thread)[0]["update"]["searches"]
    assert searches[-1]["query"] == "aspirin"


async def test_replay_problems_are_named(make_context, settings):
    ctx = make_context(model())
    thread, _ = await run_question(settings, QUESTION, context=ctx)
    with pytest.raises(ReplayProblem, match="unknown node 'rerankk'"):
        await replay(settings, ctx, thread, "rerankk")
    with pytest.raises(ReplayProblem, match="never reached 'refine_query'"):
        await replay(settings, ctx, thread, "refine_query")
    with pytest.raises(ReplayProblem, match="no run with thread id 'nope'"):
        await replay(settings, ctx, "nope", "synthesize")
    with pytest.raises(ReplayProblem, match="not a state field"):
        parse_edits(["colour=blue"])
    with pytest.raises(ReplayProblem, match="expected KEY=VALUE"):
        parse_edits(["query"])


async def test_step_through_runs_one_node_at_a_time_and_takes_edits(make_context, settings):
    seen = []

    async def decide(node, state):
        seen.append(node)
        if node == "search" and state.get("query") != "plant OR cell OR leaf":
            return "edit", {"query": "plant OR cell OR leaf"}
        if node == "organize":
            return "skip", None
        return "continue", None

    thread, result, ran = await step_through(settings, make_context(model()), QUESTION, decide)
    assert seen[:4] == [
        "generate_query",
        "search",
        "search",
        "rerank",
    ]  # search asked twice: edited
    assert ran == ["generate_query", "search", "rerank", "organize"]
    assert result["exact_answer"] == "yes"
    steps = node_updates(settings, thread)
    search = next(s for s in steps if s["node"] == "search")
    assert search["update"]["searches"][0]["query"] == "plant OR cell OR leaf"


async def test_step_through_can_quit(make_context, settings):
    async def decide(node, state):
        return ("continue", None) if node == "generate_query" else ("quit", None)

    _, result, ran = await step_through(settings, make_context(model()), QUESTION, decide)
    assert result is None and ran == ["generate_query"]
