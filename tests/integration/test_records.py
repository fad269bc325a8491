"""The records real runs checkpoint conform to their TypedDicts (nodes/records.py, relations_and_votes.py).

Every field a node writes is declared (no stray keys), every required field is there, and every
value has its declared type, after a round trip through the SQLite checkpoints.
"""

from __future__ import annotations

import enum
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from langgraph.runtime import Runtime

from graphs.qa import build_graph
from graphs.runtime import run_question
from graphs.traces.read import ThreadSummary, list_threads, node_updates
from infra.bioasq.types import QuestionType
from infra.checkpoints import async_saver, saver
from infra.models import ModelPool
from infra.pubmed import PubMedClient
from infra.settings import ModelSpec
from lab.simulate.server import SimulatedEndpoint
from nodes.context import Context
from nodes.ensemble import ensemble
from nodes.state import Member, QAState, Votes
from tests.support.fakes import pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"


def problems(value: Any, hint: Any, where: str, *, partial: bool = False) -> list[str]:
    """Return where `value` departs from the type `hint` (TypedDicts checked field by field)."""
    if hint is Any:
        return []
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a {hint.__name__}"]
        fields = get_type_hints(hint)
        found = [f"{where}.{k}: not a field of {hint.__name__}" for k in value if k not in fields]
        if not partial:
            missing = sorted(hint.__required_keys__ - set(value))
            found += [f"{where}: {hint.__name__} lacks {k}" for k in missing]
        for key, item in value.items():
            if key in fields:
                found += problems(item, fields[key], f"{where}.{key}")
        return found
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if any(not problems(value, option, where) for option in args):
            return []
        return [f"{where}: {value!r:.80} is none of {hint}"]
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        return [p for k, item in value.items() for p in problems(item, args[1], f"{where}[{k!r}]")]
    if origin is tuple:  # a checkpoint may give a tuple back as a list
        if not isinstance(value, tuple | list) or len(value) != len(args):
            return [f"{where}: {value!r:.80} is not a {hint}"]
        return [
            p
            for i, (v, a) in enumerate(zip(value, args, strict=True))
            for p in problems(v, a, where)
        ]
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r:.80} is not None"]
    if isinstance(hint, type) and issubclass(hint, enum.StrEnum):
        # A checkpoint stores an enum member as its string: the value must be a member's.
        ok = isinstance(value, str) and value in {member.value for member in hint}
        return [] if ok else [f"{where}: {value!r:.80} is none of {hint.__name__}'s values"]
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r:.80} is not a float"]
    if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return []
    return [f"{where}: {value!r:.80} is not a {hint.__name__}"]


def state_problems(settings, thread_id: str, phase: str = "A+") -> list[str]:
    """Check the final state and every node's update of a checkpointed run."""
    with saver(settings.checkpoint_path) as checkpointer:
        graph = build_graph(checkpointer=checkpointer, phase=phase)
        state = graph.get_state({"configurable": {"thread_id": thread_id}}).values
    found = problems(state, QAState, "state")
    for step in node_updates(settings, thread_id):
        where = f"{step['node']} (step {step['step']})"
        found += problems(step["update"], QAState, where, partial=True)
    return found


def test_the_checker_finds_stray_missing_and_mistyped_fields():
    member = {"model": "m", "view": 0, "order": ["1"], "temperature": 0.0, "answer": ["yes"]}
    member |= {"pmids": [], "raw": "", "error": None, "latency_s": 0.1, "tokens": 3}
    assert problems(member, Member, "m") == []
    assert problems(member | {"cost": 1}, Member, "m") == ["m.cost: not a field of Member"]
    assert problems({k: v for k, v in member.items() if k != "raw"}, Member, "m") == [
        "m: Member lacks raw"
    ]
    assert problems(member | {"view": "0"}, Member, "m") == ["m.view: '0' is not a int"]
    assert problems({"table": [{"answer": "yes", "votes": 1}]}, Votes, "v") == [
        "v.table[0]: VoteRow lacks normalized"
    ]
    # A question type, stored as its string: a member's value passes, any other string fails.
    assert problems("yesno", QuestionType, "q") == []
    assert problems("yes/no", QuestionType, "q") == ["q: 'yes/no' is none of QuestionType's values"]


def duplicate_of_101(messages, kwargs):
    # 101 and 108 share their abstract: the organizer names the later one a duplicate.
    shown = pmids_in(messages)
    if "101" in shown and "108" in shown:
        first, later = sorted((shown.index("101") + 1, shown.index("108") + 1))
        return {"duplicates": [{"index": later, "same_as": first}]}
    return {"duplicates": []}


async def test_a_follow_up_with_refinement_resynthesis_and_fallback(make_context, settings, eutils):
    with_fallback = settings.model_copy(
        update={"fallback": settings.fallback.model_copy(update={"enabled": True})}
    )
    model = script(
        standalone={"question": QUESTION},
        query={"query": "mitochondria AND aspirin"},  # no hits: refine_query runs
        refine={"query": "mitochondria OR lace OR cell"},
        organize=duplicate_of_101,
        ensemble=lambda m, kw: {"answer": "yes", "pmids": pmids_in(m)[:1]},
        synthesize=lambda m, kw: {
            "exact_answer": "yes",
            "ideal_answer": "Mitochondria act early.",
            "confidence": 0.2,  # too low: again at temperature 0, then a fallback round
            "cited_pmids": pmids_in(m)[:1],
            "rationale": "The first abstract says so.",
        },
    )
    pubmed = PubMedClient(base_url=eutils.base_url, requests_per_second=1000)
    context = make_context(model, settings_=with_fallback, pubmed=pubmed)
    history = [{"question": "What is a lace plant?", "answer": "An aquatic plant."}]
    thread, _ = await run_question(
        with_fallback, "And its mitochondria?", context=context, inputs={"history": history}
    )
    assert state_problems(with_fallback, thread) == []
    steps = [s["node"] for s in node_updates(with_fallback, thread)]
    assert {"refine_query", "fallback_search"} <= set(steps)
    organized = [
        s["update"] for s in node_updates(with_fallback, thread) if s["node"] == "organize"
    ]
    assert any(r.get("applied") for u in organized for r in u["relations"])
    (summary,) = list_threads(with_fallback)
    assert problems(summary, ThreadSummary, "summary") == []


@pytest.mark.parametrize("answers", ["organize", "ensemble"])
async def test_corg_groups_decide_with_failed_synthesis(make_context, settings, answers):
    chosen = settings.model_copy(
        update={
            "organize": settings.organize.model_copy(
                update={"strategy": "corg", "corg_answers": answers}
            ),
            "ensemble": settings.ensemble.model_copy(update={"strategy": "ccv"}),
        }
    )
    triple = {"answer": "yes", "entity": "mitochondria", "descriptor": ""}
    model = script(
        query={"query": "mitochondria OR lace OR cell"},
        relation={"first": triple, "second": triple, "label": "distracting"},
        pluralize={"question": "What roles do mitochondria play?"},
        group=lambda m, kw: {"answer": "yes", "exact": "yes", "cited_pmids": pmids_in(m)[:1]},
        ensemble={"answer": "no", "passage": 1, "quote": "Mitochondria"},
        synthesize="not an answer",  # the decision stands in
    )
    thread, result = await run_question(
        chosen, QUESTION, context=make_context(model, settings_=chosen)
    )
    assert state_problems(chosen, thread) == []
    updates = {s["node"]: s["update"] for s in node_updates(chosen, thread)}
    if answers == "organize":
        # The paper's aggregator: organize answered the groups and its aggregate, with its
        # settings, is the decision; no ccv member re-mixes the groups.
        assert updates["ensemble"]["members"] == []
        assert updates["ensemble"]["decision"] == updates["organize"]["decision"]
        assert updates["organize"]["decision"]["settings"]["strategy"] == "corg"
        said = "yes"
    else:
        # The default: ccv's members answer inside CORG's one group, its passages only.
        (group,) = updates["organize"]["groups"]
        members = updates["ensemble"]["members"]
        assert "decision" not in updates["organize"] and members
        assert all(m["group"] == 1 and set(m["order"]) <= set(group["pmids"]) for m in members)
        assert updates["ensemble"]["decision"]["strategy"] == "ccv"
        said = "no"
    # Synthesis gave junk, but the groups answered: no model failure, the decision stands in.
    assert result["exact_answer"] == said and result["failed"] is False


async def test_cobag_and_a_list_question_ccv_leaves_to_the_majority(make_context, settings):
    for strategy, qtype in (("cobag", "factoid"), ("ccv", "list")):
        chosen = settings.model_copy(
            update={"ensemble": settings.ensemble.model_copy(update={"strategy": strategy})}
        )
        model = script(
            query={"query": "mitochondria OR lace OR cell"},
            organize={"duplicates": []},
            ensemble={"answer": ["cytochrome c", "Cytochrome-C"], "pmids": []},
            synthesize={
                "exact_answer": ["cytochrome c"],
                "ideal_answer": "Cytochrome c.",
                "confidence": 0.9,
                "cited_pmids": [],
            },
        )
        context = make_context(model, settings_=chosen)
        thread, _ = await run_question(chosen, QUESTION, qtype, context=context)
        assert state_problems(chosen, thread) == [], strategy
        update = next(s["update"] for s in node_updates(chosen, thread) if s["node"] == "ensemble")
        assert update["votes"]["strategy"] == strategy


async def test_phase_b_from_given_snippets(make_context, settings):
    model = script(
        organize={"duplicates": []},
        ensemble={"answer": "yes", "pmids": []},
        synthesize={"exact_answer": "yes", "ideal_answer": "Yes.", "confidence": 0.9},
    )
    text = "Mitochondrial dynamics change early during programmed cell death."
    snippet = {
        "document": "http://www.ncbi.nlm.nih.gov/pubmed/101",
        "text": text,
        "offsetInBeginSection": 0,
        "offsetInEndSection": len(text),
        "beginSection": "abstract",
        "endSection": "abstract",
    }
    given = {"documents": [snippet["document"]], "snippets": [snippet]}
    config = {"configurable": {"thread_id": "phase-b"}, "metadata": {"phase": "B"}}
    async with async_saver(settings.checkpoint_path) as checkpointer:
        graph = build_graph(checkpointer=checkpointer, phase="B")
        inputs = {"question": QUESTION, "qtype": "yesno", "given": given}
        await graph.ainvoke(inputs, config, context=make_context(model))
    assert state_problems(settings, "phase-b", phase="B") == []


async def test_moi_records_its_fits_and_likelihood_calls(settings, index, embedder):
    with SimulatedEndpoint(0.0) as endpoint:
        spec = ModelSpec(
            provider="openai", model="e0", base_url=endpoint.base_url, prompt_logprobs=True
        )
        chosen = settings.model_copy(
            update={
                "models": settings.models.model_copy(update={"ensemble": [spec]}),
                "ensemble": settings.ensemble.model_copy(update={"strategy": "moi"}),
            }
        )
        context = Context(
            settings=chosen, search=index, embedder=embedder, models=ModelPool(chosen)
        )
        state = {
            "question": QUESTION,
            "qtype": "yesno",
            "organized": index.fetch(["101", "102", "103"]),
        }
        update = await ensemble(state, Runtime(context=context))
    assert update["votes"]["moi"] and any(c.get("kind") for c in update["calls"])
    assert problems(update, QAState, "ensemble", partial=True) == []
