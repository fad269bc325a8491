"""The CLI as a user runs it, every model a simulated endpoint: chat, trace replay and step."""

import json

import pytest

from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import run_quorum, simulated_env

QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"


@pytest.fixture
def simulated(quorum_home):
    with SimulatedEndpoint(0.0) as endpoint:
        yield endpoint, simulated_env(endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off")


def test_replay_from_synthesize_makes_only_the_synthesis_call(simulated):
    endpoint, env = simulated
    asked = run_quorum(env, "ask", QUESTION, "--json")
    assert asked.returncode == 0, asked.stderr
    thread = json.loads(asked.stdout)["thread_id"]
    before = endpoint.stats.calls
    proc = run_quorum(env, "trace", "replay", thread, "--from", "synthesize", "--json")
    assert proc.returncode == 0, proc.stderr
    replayed = json.loads(proc.stdout)
    assert replayed["replay_of"] == thread and replayed["thread_id"] != thread
    # No new query, organize or ensemble call: only synthesis's and the verifier's, as many as
    # the replayed thread's synthesize steps record (a refused answer is synthesized again).
    steps = json.loads(run_quorum(env, "trace", "show", replayed["thread_id"], "--json").stdout)
    assert {s["node"] for s in steps} <= {"synthesize", "finalize"}
    made = [c["node"] for s in steps for c in (s.get("update") or {}).get("calls", [])]
    assert made and set(made) <= {"synthesize", "verify"}
    assert endpoint.stats.calls - before == len(made)
    bad = run_quorum(env, "trace", "replay", thread, "--from", "nowhere")
    assert bad.returncode == 2 and "unknown node 'nowhere'" in bad.stderr


def test_step_continues_edits_and_skips(simulated):
    _, env = simulated
    keys = 'c\ne query="lace OR leaf OR plant"\nc\ns\n'
    proc = run_quorum(env, "trace", "step", QUESTION, stdin=keys)
    assert proc.returncode == 0, proc.stderr
    assert "next: generate_query" in proc.stdout and "next: search" in proc.stdout
    assert 'query: "lace OR leaf OR plant"' in proc.stdout
    assert "ran generate_query, search" in proc.stdout


def test_chat_two_turns_trace_open_and_quit(simulated):
    _, env = simulated
    lines = f"{QUESTION}\nAnd which organelle was that?\n/trace\n/open 21645374\n/quit\n"
    proc = run_quorum(env, "chat", stdin=lines)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.count("/trace for every step") == 2  # two answered turns
    assert "read as: simulated" in text  # the follow-up was rewritten (the simulator's words)
    # /trace: every step, organize's first line naming CORG, the default for a served model.
    assert "generate_query" in text and "strategy corg (organize.strategy 'auto'" in text
    assert "[21645374]" in text  # /open of a demo-corpus abstract
