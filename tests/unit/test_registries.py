"""Registries: strategies and backends by settings name, checked against the settings Literals."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.runtime import Runtime

from graphs.cli.common import CliError
from graphs.cli.eval import eval_retrieval
from graphs.cli.index import index as index_cmd
from infra.search import backends
from infra.settings import (
    EnsembleSettings,
    OrganizeSettings,
    SearchSettings,
    SettingsError,
    choices,
    load_settings,
)
from lab.cli.bench import bench_faults_cmd
from lab.cli.bench_search import bench_retrieval_cmd
from nodes.ensemble import ensemble
from nodes.ensemble.strategies import registry as ensemble_registry
from nodes.organize import organize
from nodes.organize.strategies import registry as organize_registry
from tests.support.fakes import script

# Today "embedded or elasticsearch": the messages the CLI always gave; a new backend joins them.
NAMES = " or ".join(backends.BACKENDS)

REGISTRIES = {
    "ensemble.strategy": (EnsembleSettings, "strategy", ensemble_registry.STRATEGIES),
    "organize.strategy": (OrganizeSettings, "strategy", organize_registry.STRATEGIES),
    "search.backend": (SearchSettings, "backend", backends.BACKENDS),
}


CHOOSERS = {"organize.strategy": {organize_registry.AUTO}}
"""Names a Literal holds beside the registered ones: they choose one (organize's "auto")."""


@pytest.mark.parametrize("setting", list(REGISTRIES))
def test_the_settings_literal_names_exactly_the_registered_names(setting):
    group, field, registry = REGISTRIES[setting]
    names = choices(group, field)
    assert len(set(names)) == len(names)
    assert sorted(set(names) - CHOOSERS.get(setting, set())) == sorted(registry)
    assert not CHOOSERS.get(setting, set()) & set(registry)


@pytest.mark.parametrize("setting", list(REGISTRIES))
def test_an_unknown_name_in_the_settings_is_a_one_line_error(setting):
    group, field = setting.split(".")
    with pytest.raises(SettingsError) as caught:
        load_settings(**{group: {field: "magic"}})
    message = str(caught.value)
    assert message.startswith(f"invalid setting {setting}:") and "\n" not in message


def with_setting(settings, group: str, **changes):
    """Copy settings past validation, as model_copy does (no Literal stops an unknown name)."""
    return settings.model_copy(update={group: getattr(settings, group).model_copy(update=changes)})


def test_an_unknown_backend_is_refused_not_opened_as_another(settings):
    magic = with_setting(settings, "search", backend="magic")
    for call in (
        lambda: backends.open_backend(magic, None),
        lambda: backends.open_writer(magic, None),
        lambda: backends.drop_index(magic),
    ):
        with pytest.raises(SettingsError) as caught:
            call()
        assert str(caught.value) == (
            f"invalid setting search.backend: unknown backend 'magic'; choose {NAMES}"
        )


async def test_an_unknown_strategy_is_refused_before_any_call(make_context, settings):
    model = script(ensemble={"answer": "yes", "pmids": []}, organize={"duplicates": []})
    state = {"question": "Q?", "qtype": "yesno", "contexts": [], "organized": []}
    for node, group in ((ensemble, "ensemble"), (organize, "organize")):
        ctx = make_context(model, settings_=with_setting(settings, group, strategy="magic"))
        with pytest.raises(SettingsError, match=rf"^invalid setting {group}\.strategy: unknown"):
            await node(state, Runtime(context=ctx))
    assert model.calls == []


# --- registration ------------------------------------------------------------------------------


@pytest.fixture
def scratch_registries(monkeypatch):
    """Let a test register toys in copies of the registries, gone after the test."""
    monkeypatch.setattr(ensemble_registry, "STRATEGIES", dict(ensemble_registry.STRATEGIES))
    monkeypatch.setattr(organize_registry, "STRATEGIES", dict(organize_registry.STRATEGIES))
    monkeypatch.setattr(backends, "BACKENDS", dict(backends.BACKENDS))


async def test_a_registered_ensemble_strategy_is_what_the_node_runs(
    scratch_registries, make_context, settings
):
    @ensemble_registry.register("reversed")
    class Reversed(ensemble_registry.Strategy):
        async def plan(self, ctx, question, contexts, models, seed):
            order = list(range(len(contexts)))[::-1]
            ran = ensemble_registry.StrategySettings.of(
                ctx, models, members=1, contexts=len(contexts), temperature=0.0
            )
            return ensemble_registry.Plan(
                ensemble_registry.every_model(models, [order], 0.0),
                contexts,
                ran,
                diagnostics={"toy": True},
            )

    model = script(ensemble={"answer": "no", "pmids": []})
    ctx = make_context(model, settings_=with_setting(settings, "ensemble", strategy="reversed"))
    contexts = ctx.search.fetch(["101", "102", "103"])
    state = {"question": "Q?", "qtype": "yesno", "organized": contexts}
    update = await ensemble(state, Runtime(context=ctx))
    assert [m["order"] for m in update["members"]] == [["103", "102", "101"]]
    assert update["votes"]["strategy"] == "reversed" and update["votes"]["toy"] is True
    assert update["votes"]["ranked"] == ["no"] and len(update["calls"]) == 1
    with pytest.raises(ValueError, match="registered twice"):
        ensemble_registry.register("reversed")(Reversed)


async def test_a_registered_organize_strategy_is_what_the_node_runs(
    scratch_registries, make_context, settings
):
    @organize_registry.register("reversed")
    class Reversed(organize_registry.OrganizeStrategy):
        async def organize(self, ctx, question, contexts, model, qtype):
            return {"organized": contexts[::-1], "relations": []}

    ctx = make_context(script(), settings_=with_setting(settings, "organize", strategy="reversed"))
    state = {"question": "Q?", "contexts": ctx.search.fetch(["101", "102"])}
    update = await organize(state, Runtime(context=ctx))
    assert [c["pmid"] for c in update["organized"]] == ["102", "101"]


class ToyBackend:
    """A backend that records what it was asked to do."""

    def __init__(self):
        self.asked: list[str] = []

    def open(self, settings, embedder):
        self.asked.append("open")
        return "searcher"

    def open_writer(self, settings, embedder):
        self.asked.append("open_writer")
        return "writer"

    def drop(self, settings):
        self.asked.append("drop")

    def journal_path(self, settings, writer):
        return settings.home / f"toy-{writer}.json"


def test_a_registered_backend_is_opened_written_dropped_and_journaled(scratch_registries, settings):
    toy = backends.BACKENDS["toy"] = ToyBackend()
    chosen = with_setting(settings, "search", backend="toy")
    assert backends.open_backend(chosen, None) == "searcher"
    writer = backends.open_writer(chosen, None)
    backends.drop_index(chosen)
    assert toy.asked == ["open", "open_writer", "drop"]
    assert backends.journal_path(chosen, writer) == settings.home / "toy-writer.json"


def test_the_embedded_journal_lives_in_its_index(settings):
    writer = backends.open_writer(settings, None)
    try:
        assert backends.journal_path(settings, writer) == settings.index_dir / "ingest-journal.json"
    finally:
        writer.close()


# --- the CLI's --backend choices are the registry's names ---------------------------------------


def test_cli_backend_choices_are_the_registry(tmp_path: Path):
    assert NAMES.startswith("embedded or elasticsearch")
    runs = {
        f"unknown --backend 'magic'; choose {NAMES}": [
            lambda: index_cmd([tmp_path / "x.jsonl"], backend="magic"),
            lambda: eval_retrieval(None, [tmp_path / "q.json"], backend="magic"),
            lambda: bench_faults_cmd(backend="magic"),
        ],
        f"unknown backend 'magic'; choose {' and/or '.join(backends.BACKENDS)}": [
            lambda: bench_retrieval_cmd(None, tmp_path / "c.jsonl", [], backends="embedded,magic"),
        ],
    }
    for message, calls in runs.items():
        for call in calls:
            with pytest.raises(CliError) as caught:
                call()
            assert str(caught.value) == message


def test_the_model_providers_are_the_settings_literal_and_each_owns_its_differences():
    from infra.models import PROVIDERS, provider_for
    from infra.settings import ModelSpec

    assert sorted(choices(ModelSpec, "provider")) == sorted(PROVIDERS)
    local = ModelSpec(provider="local", model="demo")
    remote = ModelSpec(provider="openai", model="m", base_url="http://127.0.0.1:9/v1")
    assert provider_for(local).endpoint(local) is None  # nothing to probe
    assert provider_for(remote).endpoint(remote) == "http://127.0.0.1:9/v1"
    assert provider_for(remote).problem("query", remote) is None
    keyless = ModelSpec(provider="openai", model="m")
    assert "set base_url or api_key_env" in provider_for(keyless).problem("query", keyless)
    settings = load_settings()
    assert provider_for(local).calls_at_once(local, settings, 16) == 1
    assert provider_for(remote).calls_at_once(remote, settings, 2) == (
        2 * settings.ensemble.max_concurrency
    )
    assert "gives none" in provider_for(remote).likelihood_problem(remote)
    assert provider_for(local).likelihood_problem(local) is None
    # a model handed in (a test's scripted model) is asked as an injected one
    assert provider_for(remote, script()).__class__.__name__ == "Injected"
