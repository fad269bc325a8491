"""A model that answers nothing usable fails the run; evidence without an answer guesses nothing."""

from graphs.cli.ask import answer_json
from graphs.describe import EXACT_ANSWER, answer_lines
from graphs.runtime import run_question
from graphs.traces.read import list_threads
from nodes.records import model_failed
from tests.support.fakes import pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"


async def test_a_model_replying_only_junk_fails_the_run_naming_role_and_reply(
    make_context, settings
):
    junk = script(query="][{", organize="][{", ensemble="][{", synthesize="][{")
    thread, result = await run_question(settings, QUESTION, "yesno", context=make_context(junk))
    assert model_failed(result) and result["exact_answer"] is None
    reason = result["insufficient_reason"]
    assert "ensemble: local model returned '][{'" in reason
    assert "synthesis: local model returned '][{'" in reason
    (listed,) = [t for t in list_threads(settings) if t["thread_id"] == thread]
    assert (listed["status"], listed["answer"]) == ("failed", None)
    assert listed["error"] == reason


async def test_members_down_and_synthesis_answering_is_insufficient_with_no_exact_answer(
    make_context, settings
):
    model = script(
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=ConnectionError("endpoint down"),
        synthesize=lambda m, kw: {
            "exact_answer": "no",
            "ideal_answer": "No, they do not.",
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        },
    )
    thread, result = await run_question(settings, QUESTION, "yesno", context=make_context(model))
    assert not model_failed(result) and result["insufficient"] is True
    shown = answer_json(result | {"thread_id": thread})
    assert shown["exact_answer"] is None and shown["type"] == "yesno"  # `ask --json`
    assert shown["insufficient_reason"].startswith("no ensemble member gave a usable answer")
    lines = answer_lines(result)  # ask, chat
    assert not any(line.startswith(EXACT_ANSWER) for line in lines)
    assert lines[0].startswith("Ideal answer (yesno): Insufficient evidence: no ensemble member")


def test_an_older_insufficient_result_holding_a_shaped_no_shows_no_exact_answer():
    kept = {"type": "yesno", "exact_answer": "no", "insufficient": True, "ideal_answer": "x."}
    assert not any(line.startswith(EXACT_ANSWER) for line in answer_lines(kept))
