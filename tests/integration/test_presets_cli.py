"""`quorum ask` as shipped, with `--preset papers` and with `--preset fast`, every model one
simulated OpenAI-compatible endpoint: what each runs, shown by the trace and the calls made."""

import json

import pytest

from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import ON_THE_QUESTION, run_quorum, simulated_env

QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    home = tmp_path_factory.mktemp("presets-home")
    with SimulatedEndpoint(0.0) as endpoint:
        env = simulated_env(endpoint.base_url, home, QUORUM_MODELS__CACHE="off", **ON_THE_QUESTION)
        yield endpoint, env


def ask(simulated, *flags: str) -> tuple[dict, list[str], dict[str, int]]:
    """Ask with these flags; return the result, the organize step's trace, and calls by role."""
    endpoint, env = simulated
    before = endpoint.stats.calls
    proc = run_quorum(env, "ask", QUESTION, "--json", *flags)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    shown = run_quorum(env, "trace", "show", result["thread_id"], "--node", "organize")
    assert shown.returncode == 0, shown.stderr
    steps = json.loads(run_quorum(env, "trace", "show", result["thread_id"], "--json").stdout)
    calls: dict[str, int] = {}
    for step in steps:
        for call in (step.get("update") or {}).get("calls") or []:
            calls[call["node"]] = calls.get(call["node"], 0) + 1
    assert sum(calls.values()) == endpoint.stats.calls - before  # every call is in the trace
    return result, shown.stdout.splitlines(), calls


def test_a_served_model_is_organized_by_corg_by_default_and_the_trace_says_why(simulated):
    result, organize, calls = ask(simulated)
    assert (
        "    strategy corg (organize.strategy 'auto': the organize model 'sim' is an "
        "OpenAI-compatible endpoint)"
    ) in organize
    assert any(line.lstrip().startswith("relation graph:") for line in organize)
    # CORG's relation calls, the ensemble's members answering its group, the verifier's call.
    assert calls["organize"] >= 2 and calls["ensemble"] >= 1 and calls["verify"] >= 1
    left = "answer: (the ensemble's to answer: organize.corg_answers 'ensemble')"
    assert any(line.strip() == left for line in organize)
    assert result["support"]["verified"] != "not verified"


def test_preset_papers_runs_corg_and_the_verifier_by_name(simulated):
    _, organize, calls = ask(simulated, "--preset", "papers")
    assert "    strategy corg (organize.strategy 'corg')" in organize
    assert calls["organize"] >= 2 and calls["ensemble"] >= 1 and calls["verify"] >= 1


def test_preset_fast_is_one_member_no_corg_no_verifier(simulated):
    result, organize, calls = ask(simulated, "--preset", "fast")
    assert "    strategy dedupe (organize.strategy 'dedupe')" in organize
    # The query, one organize call, one member, two syntheses: nothing else. The simulator's
    # prose ("A simulated answer drawn from the shown abstracts.") does not address the question,
    # so the support check refuses it and synthesis's gate asks once more at T 0; the member's
    # vote then stands in.
    assert calls == {"generate_query": 1, "organize": 1, "ensemble": 1, "synthesize": 2}
    assert not result["insufficient"] and result["support"]["verdict"] == "supported"
    assert result["support"]["verified"] == "not verified"
