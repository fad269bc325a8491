"""organize.strategy "auto": CORG for a served model, dedupe for a local one, said in the trace."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graphs.describe import trace_text
from infra.settings import Settings, load_settings
from nodes.organize import organize
from nodes.organize.strategies import chosen_strategy
from tests.support.fakes import node_of, pmids_in, script

ENDPOINT = {"provider": "openai", "model": "served-7b", "base_url": "http://127.0.0.1:9/v1"}
QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"


def served(settings: Settings, **organize_settings) -> Settings:
    """Every role on one OpenAI-compatible endpoint (organize defaults to the query model)."""
    return load_settings(
        home=settings.home,
        models={"query": ENDPOINT, "ensemble": [ENDPOINT]},
        organize=organize_settings,
    )


def test_auto_is_the_default_and_chooses_by_the_organize_model(settings):
    assert Settings.model_fields["organize"].default_factory().strategy == "auto"
    strategy, why = chosen_strategy(settings)  # the demo model, local
    assert strategy.name == "dedupe" and why.startswith("organize.strategy 'auto': ")
    assert "local" in why
    strategy, why = chosen_strategy(served(settings))
    assert strategy.name == "corg" and "'served-7b' is an OpenAI-compatible endpoint" in why
    # The organize role's own model decides, as the verify role's decides verify.enabled.
    local_organizer = load_settings(
        home=settings.home,
        models={"query": ENDPOINT, "ensemble": [ENDPOINT], "organize": {"provider": "local"}},
    )
    assert chosen_strategy(local_organizer)[0].name == "dedupe"
    # A name given is run whatever the model: no choice is made over the user's.
    strategy, why = chosen_strategy(served(settings, strategy="dedupe"))
    assert strategy.name == "dedupe" and why == "organize.strategy 'dedupe'"
    corg_local = load_settings(home=settings.home, organize={"strategy": "corg"})
    assert chosen_strategy(corg_local)[0].name == "corg"


def test_auto_reads_the_environment(settings, monkeypatch):
    monkeypatch.setenv("QUORUM_ORGANIZE__STRATEGY", "dedupe")
    chosen = load_settings(home=settings.home, models={"query": ENDPOINT, "ensemble": [ENDPOINT]})
    assert chosen_strategy(chosen)[0].name == "dedupe"


def corg_model():
    """A model that answers CORG's calls (and dedupe's, which CORG never makes)."""
    triple = {"answer": "yes", "entity": "mitochondria", "descriptor": "lace plant"}
    return script(
        relation={"first": triple, "second": triple, "label": "none"},
        pluralize={"question": "Which roles do mitochondria play?"},
        group=lambda m, kw: {"answer": "Yes.", "exact": "yes", "cited_pmids": pmids_in(m)[:1]},
        organize={"duplicates": []},
    )


async def test_a_served_model_is_organized_by_corg_and_the_trace_says_why(
    make_context, settings, index
):
    state = {"question": QUESTION, "qtype": "yesno", "contexts": index.fetch(["101", "103"])}
    model = corg_model()
    update = await organize(state, Runtime(context=make_context(model, settings_=served(settings))))
    # CORG relates and groups; the ensemble answers the group (organize.corg_answers
    # "ensemble"), so organize asks its plural form and pays no answer call of its own.
    assert update["relation_graph"]["calls"] == 1 and "decision" not in update
    assert [node_of(c["messages"]) for c in model.calls] == ["relation", "pluralize"]
    (group,) = update["groups"]
    assert group["answered_by"] == "ensemble" and group["question"] != QUESTION
    assert update["notes"][0] == (
        "organize: strategy corg (organize.strategy 'auto': the organize model 'served-7b' is "
        "an OpenAI-compatible endpoint)"
    )
    lines = trace_text("organize", update)[0]
    assert lines[0] == update["notes"][0].removeprefix("organize: ")
    # Negative control: the same question with the local demo model is deduplicated, one call.
    model = corg_model()
    update = await organize(state, Runtime(context=make_context(model, settings_=settings)))
    assert "relation_graph" not in update and "decision" not in update and len(model.calls) == 1
    assert update["notes"][0].startswith("organize: strategy dedupe (organize.strategy 'auto': ")
    assert trace_text("organize", update)[0][0].startswith("strategy dedupe (")


def test_eval_methods_measures_an_ensemble_strategy_by_its_members_not_by_corg(settings):
    from lab.trials.controls import strategy_settings

    # The planted reader is an endpoint: "auto" would run CORG, and each strategy would vote
    # inside its groups, not over the paper's top-m (lab/trials/controls.py says why).
    endpoint = served(settings)
    assert chosen_strategy(endpoint)[0].name == "corg"
    for name in ("single", "permute_vote", "self_consistency", "cobag", "ccv", "moi"):
        assert chosen_strategy(strategy_settings(endpoint, name))[0].name == "dedupe", name
    corg = strategy_settings(endpoint, "corg")
    # CORG's arm answers its groups itself, the paper's aggregator, as its baselines do.
    assert chosen_strategy(corg)[0].name == "corg" and corg.organize.corg_answers == "organize"
