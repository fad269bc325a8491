"""`quorum serve`: the API over scripted turns, and the page driven in headless Chromium."""

import asyncio
import itertools
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from graphs.chat.conversation import Turn
from graphs.cli import app as cli_app
from graphs.cli.common import CliError
from graphs.describe import (
    CITED_EVIDENCE,
    CONFIDENCE,
    EXACT_ANSWER,
    IDEAL_ANSWER,
    NO_EVIDENCE,
    RETRIEVAL_ORDER,
    RETRIEVED_DOCUMENTS,
)
from graphs.web.server import _answer, create_app, is_loopback
from infra.settings import load_settings
from tests.support.data import ANSWERING_NODES
from tests.support.fakes import pmids_in, script

STANDALONE = "Do mitochondria drive lace plant programmed cell death?"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ANSWERS = Path(__file__).resolve().parents[1] / "fixtures" / "answers"


def chat_model(delay_s: float = 0.0, ensemble=None, gate: threading.Event | None = None):
    def member(messages, kwargs):
        time.sleep(delay_s)  # scripted models run in a thread executor, like local models
        if gate is not None:
            assert gate.wait(10), "the test never opened the gate"
        return {"answer": "yes", "pmids": pmids_in(messages)[:1]}

    return script(
        standalone={"question": STANDALONE},
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=ensemble or member,
        synthesize=lambda m, kw: {
            "exact_answer": "yes",
            "ideal_answer": "Mitochondria act early in lace plant cell death [101].",
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        },
    )


def client_for(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def parse_events(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        if not lines:
            continue
        name = next(line[6:].strip() for line in lines if line.startswith("event:"))
        data = "".join(line[5:].strip() for line in lines if line.startswith("data:"))
        events.append((name, json.loads(data)))
    return events


async def ask(client: httpx.AsyncClient, conversation: str, question: str):
    async with client.stream(
        "POST", f"/api/conversations/{conversation}/turns", json={"question": question}
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return parse_events((await response.aread()).decode())


async def new_conversation(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/conversations")
    assert response.status_code == 201
    return response.json()["id"]


async def test_a_turn_streams_started_then_nodes_then_the_answer_with_its_evidence(
    make_context, settings
):
    async with client_for(create_app(settings, make_context(chat_model()))) as client:
        conversation = await new_conversation(client)
        events = await ask(client, conversation, "Do mitochondria matter in lace plants?")
        thread = events[-1][1]["thread_id"]
        steps = (await client.get(f"/api/threads/{thread}/steps")).json()["steps"]
    names = [name for name, _ in events]
    assert names[0] == "started" and events[0][1]["conversation"] == conversation
    assert [d["node"] for n, d in events if n == "node"] == ANSWERING_NODES
    # The status comes from real events: each node is announced as it starts, before its result.
    assert [d["node"] for n, d in events if n == "start"] == ANSWERING_NODES
    starts = [i for i, (n, _) in enumerate(events) if n == "start"]
    ends = [i for i, (n, _) in enumerate(events) if n == "node"]
    assert all(s < e for s, e in zip(starts, ends, strict=True))
    assert {d["node"]: d["line"] for n, d in events if n == "node"}["search"] == "searched: 5 hits"
    assert names[-1] == "answer" and "error" not in names
    assert ("progress", {"node": "ensemble", "done": 5, "total": 5}) in events
    assert {d["node"] for n, d in events if n == "token"} >= {"generate_query", "synthesize"}
    summaries = {d["node"]: d["summary"] for n, d in events if n == "node"}
    assert summaries["search"] == "5 hits"
    assert summaries["generate_query"] == "query: mitochondria OR lace OR cell"
    answer = events[-1][1]
    # The synthesizer said 0.9; no model but its author judged it, so it reports at most 0.5.
    assert answer["exact_answer"] == "yes" and answer["confidence"] == 0.5
    assert answer["thread_id"].startswith(conversation) and not answer["rewritten"]
    assert "citations" not in answer
    result = next(s["update"]["result"] for s in steps if s["node"] == "finalize")
    # Retrieved documents in the order retrieval gave them, each marked whether it is cited.
    assert [d["pmid"] for d in answer["documents"]] == result["documents"]
    assert {d["pmid"] for d in answer["documents"]} == {"101", "102", "103", "105", "108"}
    first = next(d for d in answer["documents"] if d["pmid"] == "101")
    assert first["title"] == "Mitochondria drive programmed cell death in lace plant leaves"
    assert first["cited"] == any(e["pmid"] == "101" for e in answer["evidence"])
    # Each document says whether it addresses the question: only those that do are evidence.
    assert first["relevance"].startswith("on the question")
    assert answer["insufficient"] is False
    assert answer["confidence_text"].startswith(f"{answer['confidence']:.2f}")
    for cited in answer["evidence"]:  # each cited passage with the sentence it rests on
        assert set(cited) == {"pmid", "title", "sentence", "relevance"} and cited["sentence"]
        assert cited["relevance"].startswith("on the question")


async def test_a_model_failure_ends_the_turn_with_an_error_not_an_answer(make_context, settings):
    """As `ask` exits 1 when no model gives anything usable, the page gets one error event."""
    junk = script(
        standalone={"question": STANDALONE},
        query="][{",
        organize="][{",
        ensemble="][{",
        synthesize="][{",
    )
    async with client_for(create_app(settings, make_context(junk))) as client:
        conversation = await new_conversation(client)
        events = await ask(client, conversation, "Do mitochondria matter in lace plants?")
    names = [name for name, _ in events]
    assert names[-1] == "error" and "answer" not in names
    message = events[-1][1]["message"]
    assert message.startswith("no answer: ") and "returned '][{'" in message
    assert "\n" not in message


def test_the_answer_event_keeps_cited_evidence_apart_from_retrieval_order():
    result = json.loads((ANSWERS / "cited.json").read_text())
    answer = _answer(Turn(1, "Q?", "Q?", "t-1", result))
    assert [d["pmid"] for d in answer["documents"]] == ["201", "202", "203", "204", "205", "206"]
    assert [d["pmid"] for d in answer["documents"] if d["cited"]] == ["203", "205"]
    # This result predates relevance verdicts: each row says nothing of relevance, never a guess.
    assert answer["evidence"] == [row | {"relevance": ""} for row in result["evidence"]]
    assert answer["confidence_text"] == "0.40 from the evidence (model said 0.95)"
    assert answer["exact_text"] == "yes" and answer["insufficient"] is False
    insufficient = json.loads((ANSWERS / "insufficient.json").read_text())
    honest = _answer(Turn(2, "Q?", "Q?", "t-2", insufficient))
    assert honest["insufficient"] is True and honest["evidence"] == []
    assert honest["ideal_answer"].startswith("Insufficient evidence: ")
    assert honest["exact_answer"] is None and honest["exact_text"] is None
    # A yes/no result an older quorum kept, its empty answer shaped as "no": no answer either.
    shaped = insufficient | {"type": "yesno", "exact_answer": "no"}
    assert _answer(Turn(3, "Q?", "Q?", "t-3", shaped))["exact_text"] is None


def test_the_page_uses_the_answer_words_of_the_cli():
    script_text = (Path(create_app.__code__.co_filename).parent / "app.js").read_text()
    for words in (EXACT_ANSWER, IDEAL_ANSWER, CONFIDENCE, CITED_EVIDENCE, RETRIEVED_DOCUMENTS):
        assert f'"{words}"' in script_text
    assert f'"{NO_EVIDENCE}"' in script_text and f'"{RETRIEVAL_ORDER}"' in script_text
    assert "best first" not in script_text and "Citations" not in script_text


async def test_a_follow_up_is_rewritten_and_the_conversation_lists_both_turns(
    make_context, settings
):
    async with client_for(create_app(settings, make_context(chat_model()))) as client:
        conversation = await new_conversation(client)
        first = (await ask(client, conversation, "Do mitochondria matter in lace plants?"))[-1]
        second = (await ask(client, conversation, "Which study said that?"))[-1]
        listed = (await client.get(f"/api/conversations/{conversation}")).json()
    assert first[0] == second[0] == "answer"
    assert second[1]["asked"] == "Which study said that?"
    assert second[1]["question"] == STANDALONE and second[1]["rewritten"]
    assert second[1]["thread_id"] != first[1]["thread_id"]
    assert [t["asked"] for t in listed["turns"]] == [
        "Do mitochondria matter in lace plants?",
        "Which study said that?",
    ]


async def test_documents_and_steps_of_a_turn(make_context, settings):
    async with client_for(create_app(settings, make_context(chat_model()))) as client:
        conversation = await new_conversation(client)
        answer = (await ask(client, conversation, "Do mitochondria matter in lace plants?"))[-1][1]
        doc = await client.get("/api/documents/101")
        missing = await client.get("/api/documents/999999")
        garbled = await client.get("/api/documents/abc")
        steps = await client.get(f"/api/threads/{answer['thread_id']}/steps")
        unknown = await client.get("/api/threads/no-such-thread/steps")
    assert doc.status_code == 200
    assert doc.json()["title"].startswith("Mitochondria drive")
    assert "Cyclosporin A" in doc.json()["abstract"]
    assert missing.status_code == 404 and "999999" in missing.json()["error"]
    assert garbled.status_code == 400
    assert steps.status_code == 200
    found = steps.json()["steps"]
    assert [s["node"] for s in found] == ANSWERING_NODES
    by_node = {s["node"]: s for s in found}
    assert by_node["search"]["update"]["hits"] == 5
    assert by_node["search"]["lines"][0].startswith("mitochondria OR lace OR cell → 5 hits in ")
    assert by_node["ensemble"]["lines"][0].startswith("strategy ")
    assert "members" in by_node["ensemble"]["described"]
    assert any(line.startswith("attempt in round") for line in by_node["synthesize"]["lines"])
    assert by_node["finalize"]["update"]["result"]["exact_answer"] == "yes"
    assert unknown.status_code == 404 and "no-such-thread" in unknown.json()["error"]


async def test_bad_input_is_a_one_line_4xx(make_context, settings):
    async with client_for(create_app(settings, make_context(chat_model()))) as client:
        conversation = await new_conversation(client)
        url = f"/api/conversations/{conversation}/turns"
        empty = await client.post(url, json={"question": "   "})
        long = await client.post(url, json={"question": "why " * 1001})
        absent = await client.post(url, json={})
        bad_id = await client.post("/api/conversations/..%2Fx/turns", json={"question": "why?"})
        remote = await client.get("/api/health", headers={"Host": "evil.example"})
    assert empty.status_code == 400 and empty.json() == {"error": "the question is empty"}
    assert long.status_code == 400 and "limit is 4,000" in long.json()["error"]
    assert absent.status_code == 422 and absent.json()["error"].startswith("question:")
    assert bad_id.status_code in (400, 404)
    for response in (empty, long, absent, bad_id):
        assert "\n" not in response.json()["error"]
    assert remote.status_code == 400  # Host check against DNS rebinding


async def test_health_answers_while_a_slow_turn_runs(make_context, settings):
    app = create_app(settings, make_context(chat_model(delay_s=0.5)))
    async with client_for(app) as client:
        conversation = await new_conversation(client)
        turn = asyncio.create_task(ask(client, conversation, "Do mitochondria matter?"))
        while (await client.get("/api/health")).json()["running"] == 0:
            assert not turn.done()
            await asyncio.sleep(0.02)
        started = time.monotonic()
        health = await client.get("/api/health")
        took = time.monotonic() - started
        again = await client.post(
            f"/api/conversations/{conversation}/turns", json={"question": "And then?"}
        )
        assert not turn.done()
        events = await turn
    assert health.json() == {"status": "ok", "running": 1} and took < 0.25
    assert again.status_code == 409
    assert events[-1][0] == "answer"


async def test_no_secret_reaches_a_response(make_context, tmp_path, monkeypatch):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("QUORUM_SERVER_TEST_KEY", secret)
    spec = {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    settings = load_settings(
        home=tmp_path / "secret-home",
        fallback={"enabled": False},
        models={"query": {**spec, "api_key_env": "QUORUM_SERVER_TEST_KEY"}},
    )
    calls = itertools.count()

    def member(messages, kwargs):
        if next(calls) == 0:
            return RuntimeError(f"401 Unauthorized for key {secret}")
        return {"answer": "yes", "pmids": pmids_in(messages)[:1]}

    context = make_context(chat_model(ensemble=member), settings_=settings)
    async with client_for(create_app(settings, context)) as client:
        conversation = await new_conversation(client)
        events = await ask(client, conversation, "Do mitochondria matter in lace plants?")
        steps = await client.get(f"/api/threads/{events[-1][1]['thread_id']}/steps")
    assert events[-1][0] == "answer"
    assert secret not in json.dumps(events) and secret not in steps.text
    assert "401 Unauthorized for key [redacted]" in steps.text


def test_serve_refuses_a_remote_host_without_allow_remote():
    result = CliRunner().invoke(cli_app, ["serve", "--host", "0.0.0.0"])
    assert isinstance(result.exception, CliError)
    assert "--allow-remote" in str(result.exception)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")


# --- the real server: streaming over a socket, and the page in a browser -----------------


@contextmanager
def serving(app) -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1, lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_started_arrives_at_once_over_a_socket(make_context, settings):
    app = create_app(settings, make_context(chat_model(delay_s=0.4)))
    with serving(app) as url, httpx.Client(base_url=url, timeout=20) as client:
        conversation = client.post("/api/conversations").json()["id"]
        sent = time.monotonic()
        with client.stream(
            "POST", f"/api/conversations/{conversation}/turns", json={"question": "Why?"}
        ) as response:
            lines = response.iter_lines()
            assert next(lines) == "event: started"
            first_after = time.monotonic() - sent
            health = httpx.get(f"{url}/api/health", timeout=5).json()
            rest = "\n".join(lines)
    assert first_after < 1.0
    assert health["running"] == 1
    assert "event: answer" in rest


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no system chromium")
def test_the_page_answers_and_steps_through_the_trace(make_context, settings, tmp_path):
    from playwright.sync_api import sync_playwright

    gate = threading.Event()  # holds the ensemble until the page has shown progress
    app = create_app(settings, make_context(chat_model(gate=gate)))
    problems: list[str] = []
    with serving(app) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(15_000)
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on(
                "console", lambda msg: problems.append(msg.text) if msg.type == "error" else None
            )
            page.goto(url)
            page.fill("#question", "Do mitochondria matter in lace plants?")
            page.click("#ask")
            page.wait_for_selector(".turn.running .progress li[data-node='organize']")
            shown = page.eval_on_selector_all(
                ".turn.running .progress li", "items => items.map(li => li.dataset.node)"
            )
            assert shown == ANSWERING_NODES[:4]
            # The next node's "start" is its own event, a moment after organize's "node": wait
            # for it (the gate holds the ensemble, so the status can only go on to it).
            page.wait_for_function(
                "() => document.querySelector('.turn.running .status')"
                ".textContent.startsWith('ensemble answering')"
            )
            before = page.inner_text(".turn.running .status")
            page.wait_for_timeout(1200)  # the step still runs: its clock must too
            after = page.inner_text(".turn.running .status")
            assert after.startswith("ensemble answering") and after != before
            gate.set()
            answer = page.wait_for_selector(".answer .documents li")
            assert answer is not None
            assert page.inner_text(".answer .exact").startswith("Exact answer: yes")
            assert "Retrieved documents (retrieval order)" in page.inner_text(".answer")
            # The scripted local model: the answer is carried, and says it was not verified.
            support = page.inner_text(".answer .support")
            assert support.startswith("Support: carried by the") and "; not verified" in support
            documents = page.locator(".answer .documents li")
            assert documents.count() == 5
            assert "[101] Mitochondria drive programmed cell death" in page.inner_text(
                ".answer .documents li[data-pmid='101']"
            )
            page.click(".documents li[data-pmid='101'] button.pmid")
            page.wait_for_selector(".documents li[data-pmid='101'] .abstract >> text=Cyclosporin")

            page.fill("#question", "Which study said that?")
            page.keyboard.press("Enter")
            page.wait_for_selector(".turn:nth-child(2) .answer")
            assert STANDALONE in page.inner_text(".turn:nth-child(2) .rewritten")

            page.click(".turn:nth-child(1) .open-trace")
            page.wait_for_selector("#trace-nodes li")
            listed = page.locator("#trace-nodes li").all_inner_texts()
            assert listed == ANSWERING_NODES
            shown = [page.inner_text("#trace-node")]
            assert page.is_disabled("#trace-prev")
            for _ in ANSWERING_NODES[1:]:
                page.click("#trace-next")
                shown.append(page.inner_text("#trace-node"))
            assert shown == ANSWERING_NODES
            assert page.is_disabled("#trace-next")
            assert page.inner_text("#trace-position") == "7 / 7"
            page.click("#trace-prev")
            page.click("#trace-prev")
            assert page.inner_text("#trace-node") == "ensemble"
            assert page.inner_text("#trace-lines").startswith("strategy ")
            page.click("#trace-update details.raw summary")
            assert '"votes"' in page.inner_text("#trace-update details.raw pre")
            page.screenshot(path=str(tmp_path / "serve.png"), full_page=True)

            page.reload()  # the conversation comes back from the URL's #chat-… id
            page.wait_for_selector(".turn:nth-child(2) .answer")
            assert page.locator(".answer .documents").count() == 2  # retrieved, per turn
        finally:
            browser.close()
    assert problems == []
    shot = tmp_path / "serve.png"
    assert shot.exists() and shot.stat().st_size > 0


async def test_a_context_that_cannot_be_built_is_one_error_event(tmp_path):
    unset = {"provider": "openai", "model": "m", "api_key_env": "QUORUM_SERVER_TEST_UNSET"}
    settings = load_settings(home=tmp_path / "home", models={"query": unset})
    async with client_for(create_app(settings)) as client:  # built lazily, on the first turn
        conversation = await new_conversation(client)
        events = await ask(client, conversation, "Do mitochondria matter?")
        health = await client.get("/api/health")
    assert [name for name, _ in events] == ["started", "status", "error"]
    assert events[-1][1] == {
        "message": "models.query 'm': environment variable QUORUM_SERVER_TEST_UNSET is not set"
    }
    assert health.json()["running"] == 0


async def test_the_page_gets_the_progress_words_and_the_demo_notice(settings):
    from graphs.describe import DEMO_NOTICE, LABELS

    async with client_for(create_app(settings)) as client:  # no context is built for it
        graph = (await client.get("/api/graph")).json()
    assert graph["labels"] == LABELS
    # The test settings name no model path, so the demo model would answer: the page says so.
    assert settings.models.uses_demo_model() and graph["demo_notice"] == DEMO_NOTICE
