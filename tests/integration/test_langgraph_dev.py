"""LangGraph's own dev server (`langgraph dev`, langgraph-cli[inmem]) runs quorum's graph out of the box.

The server is the real one, started as a user would from the repository root with langgraph.json;
the question goes through langgraph_sdk; every model is the simulated endpoint, so the run is fast.
"""

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import ON_THE_QUESTION, simulated_env

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = str(Path(sys.executable).parent / "langgraph")
QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dev_server(tmp_path):
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    with SimulatedEndpoint(0.0) as endpoint:
        home = tmp_path / "home"
        env = simulated_env(endpoint.base_url, home, QUORUM_MODELS__CACHE="off", **ON_THE_QUESTION)
        proc = subprocess.Popen(
            [LANGGRAPH, "dev", "--no-browser", "--no-reload", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
                try:
                    if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            else:
                pytest.fail("langgraph dev did not start in 120 s")
            yield url, endpoint, tmp_path / "server.log"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def test_a_question_runs_to_success_with_its_history(dev_server):
    url, endpoint, log = dev_server

    async def ask():
        client = get_client(url=url)
        thread = await client.threads.create()
        final = await client.runs.wait(thread["thread_id"], "quorum", input={"question": QUESTION})
        runs = await client.runs.list(thread["thread_id"])
        history = await client.threads.get_history(thread["thread_id"], limit=50)
        return final, runs, history

    final, runs, history = asyncio.run(ask())
    assert [r["status"] for r in runs] == ["success"], log.read_text()[-3000:]
    result = final["result"]
    assert result["question"] == QUESTION and result["ideal_answer"]
    assert result["documents"] and not result["insufficient"]
    nodes = {task["name"] for state in history for task in state.get("tasks", [])}
    assert {"generate_query", "search", "rerank", "ensemble", "synthesize", "finalize"} <= nodes
    assert endpoint.stats.calls >= 3  # the models were really asked
    assert "BlockingError" not in log.read_text()
