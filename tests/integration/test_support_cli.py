"""Issue 47 as a user meets it: a server that says the same well-formed thing whatever it is
asked, over real HTTP, and `quorum eval support` on the committed golden excerpt."""

import json

from tests.support.cli import quorum_env, run_quorum
from tests.support.servers import serve_fixed_replies

QUESTION = "Which organelle remodels lace plant leaves during programmed cell death?"
LACE = "21645374"
SENTENCE = "The role of mitochondria during PCD has been recognized in animals; however, it has been less studied during PCD in plants."


def fixed(answer: str) -> str:
    """One reply that parses as every role's answer: a query, a member, synthesis, verdicts."""
    return json.dumps(
        {
            "query": "mitochondria AND lace",
            "duplicates": [],
            "answer": answer,
            "pmids": [LACE],
            "exact_answer": [answer],
            "ideal_answer": f"{answer}, as the cited study reports.",
            "confidence": 0.9,
            "cited_pmids": [LACE],
            "rationale": "",
            "verdicts": [{"pmid": LACE, "quote": SENTENCE, "verdict": "supports"}],
        }
    )


def ask_fixed(home, answer):
    with serve_fixed_replies(fixed(answer)) as server:
        spec = {"provider": "openai", "model": "fixed", "base_url": server.base_url}
        env = quorum_env(home) | {
            "QUORUM_MODELS__QUERY": json.dumps(spec),
            "QUORUM_MODELS__ENSEMBLE": json.dumps([spec]),
            "QUORUM_FALLBACK__ENABLED": "false",
            "QUORUM_ORGANIZE__STRATEGY": "dedupe",
        }
        return run_quorum(env, "ask", QUESTION, "--type", "factoid", "--json", timeout=300)


def test_a_fixed_answer_its_evidence_does_not_carry_is_never_given(quorum_home):
    proc = ask_fixed(quorum_home, "CFTR")
    assert proc.returncode == 0, proc.stderr  # the model works: the evidence does not carry it
    result = json.loads(proc.stdout)
    assert result["insufficient"] is True and result["exact_answer"] is None
    assert result["confidence"] == 0.0 and result["evidence"] == []
    assert "'CFTR'" in result["insufficient_reason"]
    # Control: the same server naming what the abstract says is given, verified, with the
    # sentence that carries it as its evidence.
    proc = ask_fixed(quorum_home, "mitochondria")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["insufficient"] is False and result["exact_answer"] == [["mitochondria"]]
    assert result["support"]["verdict"] == "supported"
    # Its verifier quoted the abstract, but that verifier is the one model that answered.
    assert result["support"]["verified"] == "self-verified"
    assert result["support"]["judge"] == "self"
    assert any("mitochondria" in e["sentence"] for e in result["evidence"])


def test_eval_support_prints_one_json_object_by_type(quorum_home):
    env = quorum_env(quorum_home)
    excerpt = "tests/fixtures/shared_excerpts/bioasq/11B1_excerpt.json"
    proc = run_quorum(env, "eval", "support", "--questions", excerpt, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report["by_type"]) == {"yesno", "factoid", "list", "summary"}
    for row in report["by_type"].values():
        assert row["n"] == 7 and 0 <= row["false_refusal"] <= 1 and 0 <= row["swap_refusal"] <= 1
        assert 0 <= row["relevance_kept"] <= 1 and 0 <= row["relevance_swap_refused"] <= 1
        assert row["gold_contradictory"] >= 0 and row["gold_not_prose"] >= 0
    assert report["by_type"]["factoid"]["swap_refusal"] >= 0.9
    assert "by_type_verified" not in report  # the demo model: no verifier
    bad = run_quorum(env, "eval", "support", "--questions", "nosuch.json")
    assert bad.returncode == 2 and "nosuch.json" in bad.stderr and "Traceback" not in bad.stderr


def test_eval_support_with_a_verifier_reports_it_beside_the_model_free_check(quorum_home):
    # The simulated reader as the verifier (a wiring harness: it shows the verifier is asked
    # and counted, never how good a verifier is).
    from lab.simulate.server import SimulatedEndpoint
    from tests.support.cli import simulated_env

    excerpt = "tests/fixtures/shared_excerpts/bioasq/11B1_excerpt.json"
    with SimulatedEndpoint(0.0) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home)
        proc = run_quorum(env, "eval", "support", "--questions", excerpt, "--json")
        asked = endpoint.stats.calls
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    verified, alone = report["by_type_verified"], report["by_type"]
    # One call for each answer the model-free check lets through, as in the graph: the gold
    # answers it kept and the swapped ones it did not refuse.
    passed = 0
    for row in alone.values():
        refused_own = round(row["false_refusal"] * row["n"])
        apart = row["gold_contradictory"] + row["gold_not_prose"]
        passed += row["n"] - refused_own - apart + row["n"] - round(row["swap_refusal"] * row["n"])
    assert asked == passed
    for qtype, row in verified.items():
        # The verifier can only add refusals to the model-free check's.
        assert row["n"] == alone[qtype]["n"]
        assert row["false_refusal"] >= alone[qtype]["false_refusal"]
        assert row["swap_refusal"] >= alone[qtype]["swap_refusal"]


def test_one_flag_points_every_role_at_one_endpoint(quorum_home):
    # Issue 48: --model BASE_URL#NAME instead of four variables; QUORUM_MODEL the same way.
    env = quorum_env(quorum_home) | {"QUORUM_ORGANIZE__STRATEGY": "dedupe"}
    with serve_fixed_replies(fixed("mitochondria")) as server:
        flag = f"{server.base_url}#fixed"
        proc = run_quorum(env, "ask", QUESTION, "--type", "factoid", "--model", flag, "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["exact_answer"] == [["mitochondria"]]
        asked = server.completions
        assert asked >= 4  # query, members, synthesis and the verifier: all at this endpoint
        assert "demo model" not in proc.stderr
        proc = run_quorum(env | {"QUORUM_MODEL": flag}, "ask", QUESTION, "--type", "factoid")
        assert proc.returncode == 0, proc.stderr and server.completions > asked
    for bad in ("http://127.0.0.1:9/v1", "file:///etc/passwd#x"):
        proc = run_quorum(env, "ask", QUESTION, "--model", bad)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is not BASE_URL#NAME" in run_quorum(env, "ask", QUESTION, "--model", "x").stderr


def test_a_named_preset_is_chosen_with_one_flag(quorum_home, tmp_path):
    # Issue 48: named presets in the settings file, as PaperQA2's named settings.
    with serve_fixed_replies(fixed("mitochondria")) as server:
        config = tmp_path / "quorum.toml"
        config.write_text(
            "[presets.fixed.models]\n"
            f'query = {{ provider = "openai", model = "fixed", base_url = "{server.base_url}" }}\n'
            f'ensemble = [{{ provider = "openai", model = "fixed", base_url = "{server.base_url}" }}]\n'
            "[presets.fixed.organize]\n"
            'strategy = "dedupe"\n'
        )
        env = quorum_env(quorum_home) | {"QUORUM_CONFIG": str(config)}
        proc = run_quorum(env, "ask", QUESTION, "--type", "factoid", "--preset", "fixed", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["exact_answer"] == [["mitochondria"]]
        assert server.completions >= 4 and "demo model" not in proc.stderr
    unknown = run_quorum(env, "ask", QUESTION, "--preset", "nosuch")
    assert unknown.returncode == 2
    assert (
        "unknown --preset 'nosuch' (shipped: fast, papers; yours: fixed); define [presets.nosuch]"
        in unknown.stderr
    )
