"""`quorum chat` driven line by line with a scripted model: turns, follow-ups and commands."""

import io
import json
from pathlib import Path

from rich.console import Console

from graphs.chat.conversation import Turn
from graphs.chat.terminal import Chat, IdealStream, run_chat
from tests.support.fakes import pmids_in, script

ANSWERS = Path(__file__).resolve().parents[1] / "fixtures" / "answers"


def chat_model():
    return script(
        standalone={"question": "Which study showed mitochondria act in lace plant cell death?"},
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=lambda m, kw: {"answer": answer(m), "pmids": pmids_in(m)[:1]},
        synthesize=lambda m, kw: {
            "exact_answer": answer(m),
            "ideal_answer": "Mitochondria act early in lace plant cell death.",
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        },
    )


def answer(messages):
    """Answer in the shape the prompt asks for: yes/no, or entity names."""
    if "Answer yes or no" in " ".join(m.content for m in messages):
        return "yes"
    return ["the 2011 lace plant study"]


def console():
    return Console(file=io.StringIO(), width=120, record=True, force_terminal=False)


def test_two_turns_a_follow_up_trace_open_and_new(make_context, settings):
    screen = console()
    lines = iter(
        [
            "Do mitochondria play a role in lace plant programmed cell death?",
            "Which study said that?",
            "/trace",
            "/open 101",
            "/open 999999",
            "caf\udce9 \udcff",  # bytes that were not UTF-8, as surrogateescape reads them
            "/frobnicate",
            "/new",
            "/quit",
            "never read",
        ]
    )
    run_chat(settings, make_context(chat_model()), screen, lambda: next(lines))
    text = screen.export_text()
    assert "searched:" in text and "hits" in text and "ensemble: 5 answers" in text
    assert "read as: Which study showed mitochondria act in lace plant cell death?" in text
    assert "the 2011 lace plant study" in text
    assert text.count("Mitochondria act early in lace plant cell death.") >= 2
    assert "[101] Mitochondria drive programmed cell death in lace plant leaves" in text
    assert "generate_query" in text and "members:" in text  # /trace of the last turn
    assert "Mitochondrial dynamics change early" in text  # /open 101
    assert "PMID 999999 is not in the index" in text
    assert "unknown command /frobnicate" in text and "new conversation chat-" in text
    assert "that line is not UTF-8 text; type it again" in text  # and the chat went on


def test_an_answer_shows_its_cited_evidence_apart_from_the_retrieved_documents(settings):
    screen = console()
    chat = Chat(settings, None, screen)
    result = json.loads((ANSWERS / "cited.json").read_text())
    chat.show_answer(Turn(1, "Does it?", "Does rivoparin cause thrombocytopenia?", "t-1", result))
    text = screen.export_text()
    assert "read as: Does rivoparin cause thrombocytopenia?" in text
    assert "Exact answer (yesno): yes" in text
    assert "Confidence: 0.40 from the evidence (model said 0.95)" in text
    evidence, retrieved = text.split("Cited evidence:")[1].split("Retrieved documents")
    assert '[203] Thrombocytopenia after rivoparin: a cohort study\n      "Thrombocytopenia' in (
        evidence
    )
    assert "Platelet counts fell below 100,000" in evidence
    assert retrieved.startswith(" (retrieval order):\n  1. [201] Rivoparin")
    assert "  3. [203] Thrombocytopenia after rivoparin: a cohort study (cited)" in retrieved
    assert "… 1 more" in retrieved  # chat shows the first five
    assert "best first" not in text and "Citations" not in text


def test_an_insufficient_answer_is_shown_as_an_answer(settings):
    screen = console()
    chat = Chat(settings, None, screen)
    result = json.loads((ANSWERS / "insufficient.json").read_text())
    chat.show_answer(Turn(1, "Which?", "Which?", "t-2", result))
    text = screen.export_text()
    assert "Ideal answer (factoid): Insufficient evidence: no ensemble member could answer" in text
    assert "Exact answer" not in text  # nothing was supported: nothing is given
    assert "Cited evidence: none: the answer cites no passage" in text


def test_a_cancelled_turn_keeps_the_conversation(make_context, settings):
    screen = console()
    chat = Chat(settings, make_context(chat_model()), screen)

    async def cancelled(*args, **kwargs):
        raise KeyboardInterrupt

    chat._turn = cancelled
    assert chat.handle("Do mitochondria matter?") is True
    assert "turn cancelled" in screen.export_text()
    assert chat.store.turns(chat.conversation) == []


def test_ideal_answer_streams_out_of_partial_json():
    stream = IdealStream()
    pieces = [
        '{"exact_answer": "yes", "ideal',
        '_answer": "Mito',
        'chondria \\"act\\"',
        ' early.", "conf',
    ]
    assert "".join(stream.feed(p) for p in pieces) == 'Mitochondria "act" early.'


def test_a_model_failure_is_shown_as_an_error_not_an_answer(settings):
    """As `ask` exits 1 when no model gave anything usable, chat says so, and prints no answer."""
    screen = console()
    chat = Chat(settings, None, screen)
    result = json.loads((ANSWERS / "insufficient.json").read_text()) | {"failed": True}
    chat.show_answer(Turn(1, "Which?", "Which?", "t-3", result))
    text = screen.export_text()
    assert text.startswith("no answer: no ensemble member could answer this question")
    assert "Ideal answer" not in text and "thread t-3" in text
