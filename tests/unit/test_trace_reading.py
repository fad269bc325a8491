"""Reading a trace needs no graph: `trace list` and `trace show`, run as the CLI runs them in a
fresh interpreter, load records, checkpoints and rendering, never the graph, a node's machinery or
a model library; and what they read is what LangGraph's own history of the run says."""

import json
import subprocess
import sys
from pathlib import Path

from graphs.runtime import graph_nodes, run_question
from graphs.traces.read import node_updates
from infra.bioasq.types import PHASES
from tests.support.cli import quorum_env
from tests.support.fakes import pmids_in, script

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"

PROBE = """
import importlib, json, os, sys
from typer.testing import CliRunner
for name in os.environ.get("PRELOAD", "").split():
    importlib.import_module(name)
from graphs.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps({"code": result.exit_code, "output": result.output, "modules": sorted(sys.modules)}))
"""

NEVER = (
    *("graphs.qa", "graphs.runtime", "graphs.routers", "langgraph.graph", "langgraph.pregel"),
    *("nodes.context", "infra.models", "infra.search", "infra.embeddings", "infra.rerankers"),
    *("numpy", "torch", "langchain_huggingface", "transformers", "sentence_transformers"),
)
"""What reading a trace never loads: the graph, what runs it, model and engine libraries."""
NODES = tuple(f"nodes.{node}" for node in dict.fromkeys(n for p in PHASES for n in graph_nodes(p)))
"""Every node's own module or package (nodes/search.py, nodes/synthesize/, …): its machinery."""


def model():
    return script(
        query={"query": "mitochondria AND lace"},
        organize={"duplicates": []},
        ensemble=lambda m, kw: {"answer": "yes", "cited_pmids": pmids_in(m)[:1]},
        synthesize=lambda m, kw: {
            "exact_answer": "yes",
            "ideal_answer": "Yes: mitochondria act early in lace plant cell death.",
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        },
    )


def _run(home: Path, *args: str, preload: str = "") -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=quorum_env(home) | {"PYTHONPATH": str(ROOT), "PRELOAD": preload},
    )
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout.splitlines()[-1])
    assert ran["code"] == 0, ran["output"]
    return ran


def _entered(modules: list[str]) -> list[str]:
    """Return the loaded modules that are, or sit inside, something a reader never loads."""
    return [m for m in modules if any(m == n or m.startswith(f"{n}.") for n in (*NEVER, *NODES))]


async def test_trace_list_and_show_load_no_graph_no_node_and_no_model_library(
    make_context, settings
):
    thread, _ = await run_question(settings, QUESTION, "yesno", context=make_context(model()))
    listed = _run(settings.home, "trace", "list")
    assert thread in listed["output"] and "finished" in listed["output"]
    shown = _run(settings.home, "trace", "show", thread, "--node", "synthesize")
    assert "synthesize" in shown["output"] and "[raw output]" in shown["output"]
    every = _run(settings.home, "trace", "show", thread, "--json")
    assert [s["node"] for s in json.loads(every["output"])][-1] == "finalize"
    for ran in (listed, shown, every):
        assert "graphs.traces.read" in ran["modules"]
        assert _entered(ran["modules"]) == []


async def test_the_check_catches_a_reader_that_loads_the_graph(make_context, settings):
    """The negative control: the same check, on a `trace list` that has the graph loaded."""
    await run_question(settings, QUESTION, "yesno", context=make_context(model()))
    ran = _run(settings.home, "trace", "list", preload="graphs.runtime")
    entered = _entered(ran["modules"])
    assert {"graphs.qa", "langgraph.graph", "nodes.synthesize", "numpy"} <= set(entered)


async def test_a_trace_read_without_the_graph_is_langgraph_s_own_history(make_context, settings):
    """Each node's update, step and start, as the compiled graph's state history gives them."""
    from graphs.qa import build_graph
    from infra.checkpoints import read_config, saver

    low = model()
    thread, _ = await run_question(settings, QUESTION, "yesno", context=make_context(low))
    with saver(settings.checkpoint_path) as checkpointer:
        config = read_config(thread)
        history = list(build_graph(checkpointer=checkpointer).get_state_history(config))
    expected = [
        (task.name, snapshot.metadata.get("step"), snapshot.created_at, task.result)
        for snapshot in reversed(history)
        for task in snapshot.tasks
        if not task.name.startswith("__") and task.result is not None
    ]
    steps = node_updates(settings, thread)
    assert [(s["node"], s["step"], s["started"], s["update"]) for s in steps] == expected
    assert [s["node"] for s in steps][:2] == ["generate_query", "search"]
    assert all(s["seconds"] is not None for s in steps)
