"""`quorum trace list / show --node / export` over runs checkpointed with scripted models."""

import json
import sqlite3
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from graphs.cli.common import CliError
from graphs.cli.trace import trace_app
from graphs.runtime import run_question
from graphs.traces.export import export_html
from graphs.traces.read import list_threads, node_updates, thread_question
from infra.models import ModelPool
from infra.settings import load_settings
from lab.simulate.server import SimulatedEndpoint
from nodes.context import Context
from tests.support.cli import quorum, quorum_env, run_quorums
from tests.support.fakes import ScriptedChatModel, pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"
INJECTED = "<script>alert(1)</script>"
FAKE_KEY = "sk-quorum-test-FAKE-9f3c2e7a41d64b0e"


class Metered(ScriptedChatModel):
    """A scripted model that reports token usage the way real endpoints do."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        result = super()._generate(messages, stop, run_manager, **kwargs)
        for generation in result.generations:
            generation.message.usage_metadata = {
                "input_tokens": 10,
                "output_tokens": 3,
                "total_tokens": 13,
            }
        return result


def model(ideal="Mitochondria act early in lace plant cell death."):
    triple = {"answer": "yes", "entity": "mitochondria", "descriptor": ""}
    scripted = script(
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        relation={"first": triple, "second": triple, "label": "distracting"},
        pluralize={"question": "What roles do mitochondria play?"},
        group=lambda m, kw: {"answer": "yes", "cited_pmids": pmids_in(m)[:1]},
        ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]},
        synthesize=lambda m, kw: {
            "exact_answer": "yes",
            "ideal_answer": ideal,
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        },
    )
    return Metered(respond=scripted.respond, calls=[])


def with_corg(settings):
    organize = settings.organize.model_copy(update={"strategy": "corg"})
    return settings.model_copy(update={"organize": organize})


def cli(settings, *args):
    """Run a trace command in-process against the settings' data directory."""
    return CliRunner().invoke(trace_app, list(args), env={"QUORUM_HOME": str(settings.home)})


class Tags(HTMLParser):
    """Collect every tag and attribute that could make a browser fetch something."""

    FETCHING = frozenset({"link", "img", "iframe", "object", "embed", "audio", "video", "source"})

    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        if tag in self.FETCHING:
            self.found.append(tag)
        self.found += [f"{tag}[{k}]" for k, _ in attrs if k in ("src", "href", "srcset")]


def loads(page):
    """Return what in the page would load from elsewhere (nothing, for a self-contained page)."""
    parser = Tags()
    parser.feed(page)
    return parser.found


class BrokenSearch:
    """A search backend that fails, so the run stops with an error half way."""

    name = "broken"

    def __init__(self, index):
        self._index = index

    def search(self, *args, **kwargs):
        raise RuntimeError("the search backend went away")

    def __getattr__(self, name):
        return getattr(self._index, name)


# --- list -----------------------------------------------------------------------------------


async def test_list_summarises_runs_newest_first(make_context, settings):
    first_model = model()
    first, _ = await run_question(settings, QUESTION, context=make_context(first_model))
    second, _ = await run_question(
        settings,
        "Which organelle drives lace plant cell death?",
        context=make_context(model()),
        metadata={"conversation": "c1", "turn": 2},
    )
    threads = list_threads(settings)
    assert [t["thread_id"] for t in threads] == [second, first]
    newest, oldest = threads
    assert newest["question"] == "Which organelle drives lace plant cell death?"
    assert newest["conversation"] == "c1" and newest["turn"] == 2 and newest["bioasq_id"] is None
    assert newest["type"] == "factoid" and not newest["answer"].startswith("[")
    assert 0 < len(newest["answer"]) <= 80  # no exact answer: the ideal one's start
    assert oldest["status"] == "finished" and oldest["answer"] == "yes"
    calls = len(first_model.calls)
    assert oldest["calls"] == calls and oldest["tokens"] == 13 * calls
    assert oldest["input_tokens"] == 10 * calls and oldest["output_tokens"] == 3 * calls
    assert oldest["seconds"] > 0 and oldest["started"] < newest["started"]
    assert oldest["checkpoints"] == len(node_updates(settings, first)) + 2  # input and end
    assert [t["thread_id"] for t in list_threads(settings, limit=1)] == [second]

    human = cli(settings, "list")
    assert human.exit_code == 0, human.output
    lines = human.output.splitlines()
    assert lines[0].startswith("thread") and len(lines) == 3
    assert lines[1].startswith(second) and "finished" in lines[1]
    assert lines[2].startswith(first) and lines[2].endswith(f"{QUESTION[:59]}… → yes")


async def test_list_tells_a_failed_run_from_a_finished_one(make_context, settings, index):
    context = make_context(model())
    context.search = BrokenSearch(index)
    with pytest.raises(RuntimeError, match="went away"):
        await run_question(settings, QUESTION, context=context, thread_id="broken-run")
    (thread,) = list_threads(settings)
    assert thread["thread_id"] == "broken-run" and thread["status"] == "failed"
    assert "RuntimeError" in thread["error"] and "went away" in thread["error"]
    assert thread["answer"] is None and thread["question"] == QUESTION
    assert thread["calls"] == 1  # generate_query's, before search failed
    human = cli(settings, "list")
    assert "failed" in human.output and "✗ RuntimeError" in human.output


def test_list_of_an_empty_store_is_a_friendly_line(settings):
    assert list_threads(settings) == []
    settings.home.mkdir(parents=True)
    sqlite3.connect(settings.checkpoint_path).close()  # a file without the tables
    assert list_threads(settings) == []
    human = cli(settings, "list")
    assert human.exit_code == 0 and human.output.startswith("No runs recorded")
    assert json.loads(cli(settings, "list", "--json").stdout) == []


async def test_list_cli_in_a_subprocess(make_context, settings):
    thread, _ = await run_question(settings, QUESTION, context=make_context(model()))
    proc = quorum(settings.home, "trace", "list", "--json", "--limit", "5")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["thread_id"] == thread and row["status"] == "finished" and row["answer"] == "yes"
    assert set(row) >= {"question", "started", "calls", "tokens", "seconds", "type"}


# --- show --node ----------------------------------------------------------------------------


async def test_show_node_prints_each_call_with_prompt_and_raw_output(make_context, settings):
    thread, _ = await run_question(settings, QUESTION, context=make_context(model()))
    shown = cli(settings, "show", thread, "--node", "ensemble", "--json")
    assert shown.exit_code == 0, shown.output
    (step,) = json.loads(shown.stdout)
    assert set(step) == {"node", "step", "started", "seconds", "update", "calls"}
    assert step["node"] == "ensemble" and "calls" not in step["update"]
    assert len(step["calls"]) == len(step["update"]["members"]) == 5
    call = step["calls"][0]
    assert call["prompt"][0]["role"] == "system" and "PMID" in call["prompt"][-1]["content"]
    assert json.loads(call["raw"])["answer"] == "yes" and call["input_tokens"] == 10

    human = cli(settings, "show", thread, "--node", "synthesize")
    assert human.exit_code == 0, human.output
    text = human.output
    assert "synthesize" in text and "call 1/1: scripted, temperature 0.1" in text
    assert "3 out tokens" in text and "[system]" in text and "You are the final judge" in text
    assert "[raw output]" in text and '"exact_answer": "yes"' in text
    assert "generate_query" not in text  # only the chosen node's steps

    everything = json.loads(cli(settings, "show", thread, "--json").stdout)
    assert everything[0]["node"] == "generate_query"
    assert set(everything[0]) == {"node", "update"}  # unchanged without --node


async def test_show_node_refuses_an_unknown_node(make_context, settings):
    thread, _ = await run_question(settings, QUESTION, context=make_context(model()))
    unknown = cli(settings, "show", thread, "--node", "ensembel")
    assert isinstance(unknown.exception, CliError)
    assert "unknown node 'ensembel'" in str(unknown.exception)
    idle = cli(settings, "show", thread, "--node", "refine_query", "--json")
    assert idle.exit_code == 0 and json.loads(idle.stdout) == []  # a node that did not run
    proc = quorum(settings.home, "trace", "show", thread, "--node", "nope")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "unknown node 'nope'" in proc.stderr


# --- export ---------------------------------------------------------------------------------


async def test_export_of_a_corg_run_escapes_what_the_model_said(make_context, settings, tmp_path):
    corg = with_corg(settings)
    context = make_context(model(ideal=f"Mitochondria act early. {INJECTED}"), settings_=corg)
    thread, _ = await run_question(corg, QUESTION, context=context)
    steps = node_updates(corg, thread)
    page = export_html(steps, thread_id=thread, question=thread_question(corg, thread))
    assert INJECTED not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the page's own
    assert "<svg" in page and "Relation graph" in page and "distracting" in page
    assert "Vote table" in page and "Members" in page and "Costs" in page
    assert page.count('<details class="step">') == len(steps)
    assert loads(page) == []

    target = tmp_path / "trace.html"
    missing = tmp_path / "missing.html"
    proc, refused = run_quorums(
        quorum_env(corg.home),
        ["trace", "export", thread, "--html", str(target)],
        ["trace", "export", "no-such-thread", "--html", str(missing)],
    )
    assert proc.returncode == 0, proc.stderr
    written = target.read_text()
    assert "<svg" in written and INJECTED not in written
    assert refused.returncode == 2 and "no run with thread id" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["trace.html"]


# --- secrets --------------------------------------------------------------------------------


async def test_an_api_key_never_reaches_the_data_directory_or_the_outputs(
    settings, index, embedder, tmp_path, monkeypatch
):
    monkeypatch.setenv("QUORUM_TEST_FAKE_KEY", FAKE_KEY)
    with SimulatedEndpoint(0.0) as endpoint:
        spec = {
            "provider": "openai",
            "model": "simulated-remote",
            "base_url": endpoint.base_url,
            "api_key_env": "QUORUM_TEST_FAKE_KEY",
            "max_retries": 0,
        }
        remote = load_settings(
            home=settings.home,
            fallback={"enabled": False},
            models={"query": spec, "ensemble": [spec]},
        )
        models = ModelPool(remote)
        context = Context(settings=remote, search=index, embedder=embedder, models=models)
        key = models.first("query").llm.openai_api_key.get_secret_value()
        assert key == FAKE_KEY  # the key is really sent, as the bearer token
        thread, _ = await run_question(remote, QUESTION, context=context)
        assert endpoint.stats.calls > 0
    steps = node_updates(remote, thread)
    assert any(
        c["model"] == "simulated-remote" for s in steps for c in s["update"].get("calls", [])
    )
    export = tmp_path / "export.html"
    # The export in a fresh process with the key in its environment, as in the user's shell.
    exported = quorum(
        remote.home, "trace", "export", thread, "--html", str(export), QUORUM_TEST_FAKE_KEY=FAKE_KEY
    )
    assert exported.returncode == 0, exported.stderr
    shown = [
        cli(remote, "show", thread, "--json"),
        cli(remote, "show", thread, "--node", "ensemble", "--json"),
        cli(remote, "show", thread, "--node", "generate_query"),
        cli(remote, "list", "--json"),
    ]
    assert all(r.exit_code == 0 for r in shown), [r.output for r in shown]
    assert json.loads(shown[-1].stdout)[0]["tokens"] > 0  # the endpoint's usage was recorded
    said = [exported.stdout, exported.stderr, *(r.output for r in shown)]
    assert not [text for text in said if FAKE_KEY in text]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {export, remote.checkpoint_path, remote.llm_cache_path} <= set(files)
    leaked = [str(p) for p in files if FAKE_KEY.encode() in p.read_bytes()]
    assert leaked == []
