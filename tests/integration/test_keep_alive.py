"""chat, serve and a model used from one event loop after another, against a server that keeps
connections alive (HTTP/1.1), as vLLM, llama.cpp's server, Ollama and OpenAI all do.

Before the fix each of these failed on main: the second loop's calls went out over the first
loop's kept-alive sockets ("RuntimeError: Event loop is closed"), and chat's first turn failed
every call ("AssertionError") because LangGraph streams every call of a run that shows tokens
and the server answered the stream with one whole reply.
"""

import asyncio
import json
import subprocess
import time

import httpx
from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from infra.models import ModelPool
from infra.settings import ModelSpec
from tests.support.cli import QUORUM, run_quorum, simulated_env
from tests.support.lying_endpoint import serve_stub

HI = [HumanMessage(content="Is it so?")]
QUESTION = "Which gene is mutated in cystic fibrosis?"
FOLLOW_UP = "which study said that?"
BROKEN = ("Event loop is closed", "AssertionError", "no model could answer", "Traceback")


class Verdict(BaseModel):
    answer: str


def test_a_model_answers_on_one_event_loop_after_another(settings):
    with serve_stub() as stub:
        spec = ModelSpec(provider="openai", model="m", base_url=stub.base_url)
        models = settings.models.model_copy(update={"query": spec, "cache": "off"})
        chosen = settings.model_copy(update={"models": models})
        model = ModelPool(chosen).first("query")

        async def twice():
            return [await model.structured(Verdict, HI, temperature=0.0) for _ in range(2)]

        replies = asyncio.run(twice()) + asyncio.run(twice())
    assert [r.error for r in replies] == [None] * 4
    assert stub.connections == 2  # one kept alive per loop, none carried to the next
    # The temperature asked for reaches the server (it was silently the spec's).
    assert [r["temperature"] for r in stub.requests] == [0.0] * 4


def test_chat_answers_a_question_and_its_follow_up(tmp_path):
    with serve_stub(ignore_stream=True) as stub:
        env = simulated_env(stub.base_url, tmp_path / "home", QUORUM_MODELS__CACHE="off")
        lines = f"{QUESTION}\n{FOLLOW_UP}\n/quit\n"
        proc = run_quorum(env, "chat", stdin=lines, timeout=600)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown
    assert proc.stdout.count("/trace for every step") == 2, shown  # two turns, each ended
    assert not [b for b in BROKEN if b in shown], shown
    assert "read as: stub" in proc.stdout  # the follow-up was rewritten (the stub's words)
    assert stub.connections < stub.answered()  # the connections were kept alive


def test_serve_answers_over_server_sent_events_turn_after_turn(tmp_path):
    with serve_stub(ignore_stream=True) as stub:
        env = simulated_env(stub.base_url, tmp_path / "home", QUORUM_MODELS__CACHE="off")
        port = _free_port()
        server = subprocess.Popen(
            [QUORUM, "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_for(f"{base}/api/health", server)
            with httpx.Client(base_url=base, timeout=300) as client:
                conversation = client.post("/api/conversations").json()["id"]
                events = [_turn(client, conversation, q) for q in (QUESTION, FOLLOW_UP)]
        finally:
            server.terminate()
            log = server.communicate(timeout=60)[0]
    for turn in events:
        names = [name for name, _ in turn]
        assert names[0] == "started" and names[-1] == "answer", (turn, log)
    assert not [b for b in BROKEN if b in json.dumps(events) + log], log
    assert stub.connections < stub.answered()


def _turn(client: httpx.Client, conversation: str, question: str) -> list[tuple[str, dict]]:
    body = {"question": question}
    with client.stream("POST", f"/api/conversations/{conversation}/turns", json=body) as reply:
        text = "".join(reply.iter_text())
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if lines:
            name = lines[0].removeprefix("event:").strip()
            events.append((name, json.loads("".join(x[5:] for x in lines[1:]))))
    return events


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, server: subprocess.Popen, limit_s: float = 300) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()[0]
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"quorum serve did not answer {url} within {limit_s:g} s")
