"""Chat turns: a follow-up is rewritten from the history; each turn is its own checkpointed run."""

from graphs.chat.conversation import Conversations, run_turn
from graphs.traces.read import node_updates
from tests.support.fakes import pmids_in, script


def said(call):
    """Return every message of a scripted call as one text."""
    return " ".join(m.content for m in call["messages"])


def chat_model():
    return script(
        standalone={"question": "Do mitochondria drive lace plant programmed cell death?"},
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]},
        synthesize=lambda m, kw: {
            "exact_answer": "yes",
            "ideal_answer": "Mitochondria act early in lace plant cell death.",
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        },
    )


async def test_a_follow_up_is_rewritten_and_both_turns_are_recorded(make_context, settings):
    store = Conversations.for_settings(settings)
    conversation = store.new_id()
    model = chat_model()
    ctx = make_context(model)
    progress = []
    first = await run_turn(
        settings,
        ctx,
        store,
        conversation,
        "Do mitochondria matter in lace plants?",
        on_progress=progress.append,
    )
    assert first.number == 1 and first.question == "Do mitochondria matter in lace plants?"
    assert not any("You turn follow-up" in said(c) for c in model.calls)
    assert {"node": "ensemble", "done": 5, "total": 5} in progress  # live member progress
    second = await run_turn(settings, ctx, store, conversation, "Which study said that?")
    rewrites = [c for c in model.calls if "You turn follow-up" in said(c)]
    assert len(rewrites) == 1
    assert "Q: Do mitochondria matter in lace plants?" in rewrites[0]["messages"][-1].content
    assert "A: Mitochondria act early" in rewrites[0]["messages"][-1].content
    assert second.asked == "Which study said that?"
    assert second.question == "Do mitochondria drive lace plant programmed cell death?"
    assert second.thread_id != first.thread_id
    assert [t.number for t in store.turns(conversation)] == [1, 2]
    steps = node_updates(settings, second.thread_id)
    first_update = steps[0]["update"]
    assert first_update["asked"] == "Which study said that?"
    assert first_update["question"].startswith("Do mitochondria drive")
