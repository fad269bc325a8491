"""The `quorum` command end to end on the embedded defaults: real index, real embedder, real model."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphs.cli.ask import ANSWER_KEYS
from infra.search.corpus import DEMO_DOCS, read_jsonl
from lab.simulate.server import SimulatedEndpoint
from tests.support import offline
from tests.support.cli import quorum, quorum_env, run_quorum, simulated_env
from tests.support.data import ANSWERING_NODES

ROOT = Path(__file__).resolve().parents[2]
QUESTION = (
    "Do mitochondria play a role in remodelling lace plant leaves during programmed cell death?"
)


@pytest.fixture(scope="module")
def home(quorum_home) -> Path:
    return quorum_home


@pytest.fixture(scope="module")
def watched(home: Path) -> tuple[dict, list[str]]:
    """The README's first command, `ask` on the embedded defaults, in a network namespace of its
    own where the machine allows one, with every destination it asked for written down."""
    log = home / "destinations.log"
    env = quorum_env(home) | {offline.DESTINATIONS: str(log)}
    proc = subprocess.run(
        offline.command("ask", QUESTION, "--json"),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), offline.destinations(log)


@pytest.fixture(scope="module")
def asked(watched) -> dict:
    return watched[0]


@pytest.mark.slow
def test_the_readme_first_command_contacts_nothing_outside_the_machine(watched):
    """Issue 48: "no network" holds — no lookup, no connection, not even to NCBI's fallback,
    which stays off until the user gives the contact e-mail NCBI asks for."""
    answer, destinations = watched
    assert destinations == []
    assert answer["documents"]


def test_the_watch_sees_a_connection_attempt(tmp_path):
    """The negative control: the same watch records a run that does reach out (a PubMed sync
    against a closed local port), so an empty record above means nothing was attempted."""
    log = tmp_path / "destinations.log"
    env = quorum_env(tmp_path / "home") | {offline.DESTINATIONS: str(log)}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.offline",
            "pubmed",
            "sync",
            "--mirror",
            "http://127.0.0.1:9/",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert any("127.0.0.1" in line for line in offline.destinations(log))


@pytest.mark.slow
def test_ask_json_is_one_bioasq_shaped_object(asked):
    assert list(asked) == list(ANSWER_KEYS)
    assert asked["insufficient"] in (True, False) and isinstance(asked["evidence"], list)
    assert asked["type"] == "yesno"
    # An answer holds yes or no; an insufficient one holds none (nothing is guessed).
    assert asked["exact_answer"] in ((None,) if asked["insufficient"] else ("yes", "no"))
    assert 0.0 <= asked["confidence"] <= 1.0
    demo_pmids = {d["pmid"] for d in read_jsonl(DEMO_DOCS)}
    assert asked["documents"] and set(asked["documents"]) <= demo_pmids
    assert "21645374" in asked["documents"]  # the article the question is the title of
    for snippet in asked["snippets"]:
        assert snippet["document"].rsplit("/", 1)[1] in demo_pmids


@pytest.mark.slow
def test_trace_shows_the_nodes_in_order(home, asked):
    proc = quorum(home, "trace", "show", asked["thread_id"], "--json")
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)
    nodes = [s["node"] for s in steps]
    positions = [nodes.index(n) for n in ANSWERING_NODES]
    assert positions == sorted(positions)
    assert nodes[-1] == "finalize"
    final = steps[-1]["update"]["result"]
    assert final["documents"] == asked["documents"]
    human = quorum(home, "trace", "show", asked["thread_id"])
    assert human.returncode == 0 and "generate_query" in human.stdout and "finalize" in human.stdout


@pytest.mark.slow
def test_ask_human_output_names_answer_and_titles(home):
    proc = quorum(home, "ask", QUESTION, "--type", "yesno")
    assert proc.returncode == 0, proc.stderr
    # Of the ten abstracts retrieved, one is on the question (the lace plant's), and the 135M
    # demo model mostly cites another: the support check then gives no answer and says why, in
    # the same layout. An answer's own lines are held below, by a reader that cites the right
    # abstract.
    if "Exact answer (yesno):" in proc.stdout:
        assert "Ideal answer:" in proc.stdout and "✓ answer ready" in proc.stderr
    else:
        assert "Ideal answer (yesno): Insufficient evidence: " in proc.stdout
        assert "Confidence: 0.00" in proc.stdout
        assert "✗ no answer: the evidence found does not carry one" in proc.stderr
    assert "Confidence: " in proc.stdout and "Retrieved documents (retrieval order):" in proc.stdout
    assert "Citations" not in proc.stdout and "best first" not in proc.stdout
    # The same words as chat and the page, counted in the right number.
    # The demo model often copies the question: a failed query step, then the keywords.
    assert "✓ query written" in proc.stderr or (
        "✗ the model's query failed (the query is the question copied" in proc.stderr
        and "searching the question's keywords" in proc.stderr
    )
    assert "de-quantizing GGUF tensors" not in proc.stderr  # no third-party bar in a pipe
    assert "✓ searched: " in proc.stderr and " 1 hits" not in proc.stderr
    assert "[21645374] Do mitochondria play a role" in proc.stdout
    assert "SmolLM2-135M demo model" in proc.stderr


@pytest.mark.slow
def test_ask_human_output_of_an_answer_names_it_its_evidence_and_titles(home):
    # The simulated reader cites the first abstract it is shown; the dense first stage puts the
    # lace plant's first (its query, "simulated", finds only abstracts off the question).
    with SimulatedEndpoint(0.0) as endpoint:
        env = simulated_env(
            endpoint.base_url,
            home,
            QUORUM_MODELS__CACHE="off",
            QUORUM_SEARCH__DENSE_CANDIDATES="10",
        )
        proc = run_quorum(env, "ask", QUESTION, "--type", "yesno")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Exact answer (yesno): yes" and lines[1].startswith("Ideal answer: ")
    # Only the model that wrote it judged it: capped at the gate (issue 55).
    assert "Confidence: 0.50" in lines and "Cited evidence:" in lines
    title = f"[21645374] {QUESTION}"
    assert f"  {title}" in lines  # cited, by its title
    assert "Retrieved documents (retrieval order):" in lines and f"  1. {title} (cited)" in lines
    assert "Citations" not in proc.stdout and "best first" not in proc.stdout
    assert "✓ answer ready" in proc.stderr


def test_ask_with_a_model_that_replies_junk_fails_naming_endpoint_role_and_reply(
    tmp_path, junk_endpoint
):
    env = simulated_env(junk_endpoint.base_url, tmp_path / "home", QUORUM_MODELS__CACHE="off")
    proc = run_quorum(env, "ask", QUESTION, "--json", timeout=600)
    assert proc.returncode == 1, proc.stderr  # a model failure, not thin evidence
    assert proc.stdout == ""  # nothing printed as an answer
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("quorum: error: no answer: no model could answer")
    url = junk_endpoint.base_url
    assert f"ensemble: {url} returned '][{{'" in last
    assert f"synthesis: {url} returned '][{{'" in last
    listed = json.loads(run_quorum(env, "trace", "list", "--json", timeout=120).stdout)
    thread = last.rsplit("(thread ", 1)[1].rstrip(")")
    (run,) = [t for t in listed if t["thread_id"] == thread]
    assert (run["status"], run["answer"]) == ("failed", None)
    assert run["error"].startswith("no model could answer")


@pytest.mark.slow
def test_ask_with_a_model_that_replies_nothing_fails_and_prints_no_answer(tmp_path, empty_endpoint):
    env = simulated_env(empty_endpoint.base_url, tmp_path / "home", QUORUM_MODELS__CACHE="off")
    proc = run_quorum(env, "ask", "Which enzyme cleaves granzyme B?", timeout=600)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    last = proc.stderr.strip().splitlines()[-1]
    assert f"ensemble: {empty_endpoint.base_url} returned ''" in last


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", ""], "the question is empty"),
        (["ask", "   \n\t "], "the question is empty"),
        (["ask", "x" * 4001], "4,001 characters"),
        (["ask", "Is it?", "--type", "boolean"], "unknown --type 'boolean'"),
        (["trace", "show", "no-such-thread"], "no run with thread id 'no-such-thread'"),
        (["ask"], "Missing argument"),
        (
            ["eval", "organize", "--dataset", "x.jsonl", "--strategy", "magic"],
            "unknown --strategy 'magic'",
        ),
        (["eval", "organize", "--dataset", "missing.jsonl"], "missing.jsonl: no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = quorum(tmp_path, *args, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1


def test_invalid_setting_is_one_line_and_exit_2(tmp_path):
    env_home = tmp_path / "h"
    proc = quorum(env_home, "ask", "Is it?", timeout=120, QUORUM_SEARCH__INDEX="../etc")
    assert proc.returncode == 2
    assert proc.stderr.startswith("quorum: error: invalid setting search.index")
    assert "Traceback" not in proc.stderr


def test_eval_ensemble_unknown_strategy_is_one_line_and_exit_2(tmp_path):
    args = ["eval", "ensemble", "--dataset", "x.jsonl", "--strategies", "single,magic"]
    proc = quorum(tmp_path, *args, timeout=120)
    assert proc.returncode == 2
    assert "unknown strategy 'magic'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bench_pipeline_prints_one_json_object(home):
    proc = quorum(
        home,
        "bench",
        "pipeline",
        "--llm-latency",
        "0.2",
        "--models",
        "2",
        "--members",
        "2",
        "--runs",
        "1",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {"wall_s", "llm_calls", "critical_path_calls", "llm_latency_s"} <= set(report)
    # The default for a served model: CORG, one round of 9 relation calls (the simulator labels
    # every pair a duplicate; 8 in flight at once, ensemble.max_concurrency, so two waves),
    # leaving one group of one passage, which the ensemble answers: one call per model (2),
    # a single passage having one order however many members (2) there are. Then synthesis and
    # its verifier, one after the other, the answer verified at once.
    calls = report["calls_by_node"]
    assert calls["organize"] == 9 and calls["ensemble"] == 2 and calls["synthesize"] == 2
    assert report["llm_calls"] == 1 + 9 + 2 + 2 and report["critical_path_calls"] == 1 + 2 + 1 + 2
    assert report["failed_calls"] == 0 and report["llm_latency_s"] == 0.2


def test_a_data_directory_that_is_a_file_is_one_line_and_exit_1(tmp_path):

    home = tmp_path / "home"
    home.write_text("")
    proc = quorum(home, "ask", "Is aspirin effective for colorectal cancer?")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1] == (
        f"quorum: error: QUORUM_HOME {home} is a file, not a directory; set QUORUM_HOME to a "
        "directory (it is created when missing)"
    )
