"""CORG against the planted reader, over real HTTP: relations, groups and the aggregate decide.

ConflictQA records rebuilt into 4-passage cases (each memory with its aligned evidence planted
as its duplicate, the two memories each other's counterfactual) are organized by the organize
node through the `openai` provider path, and scored as `quorum eval organize` scores them.
"""

from __future__ import annotations

from collections import Counter

import pytest
from langgraph.runtime import Runtime

from infra.settings import load_settings
from lab.simulate.reader import ReaderSettings
from lab.simulate.server import SimulatedEndpoint
from lab.trials.organize import Case, evaluate_organize, load_cases
from nodes.ensemble import ensemble
from nodes.organize import organize
from tests.support.data import CONFLICTQA

CASES = load_cases(CONFLICTQA)[:12]


def plant(number: int, case: Case, answers: tuple[str, str] | None = None) -> dict:
    """Return a case as a planted question: memory side gold, counter side counterfactual."""
    (m0, m1), (c0, c1) = (item["sources"] for item in case.items)
    memory, counter = answers or tuple(item["answer"] for item in case.items)
    text = {c["pmid"]: c["abstract"] for c in case.contexts}
    return {
        "id": f"q{number}",
        "question": case.question,
        "answer": memory,
        "passages": [
            {"pmid": m0, "role": "gold", "text": text[m0]},
            {"pmid": m1, "role": "duplicate", "of": m0, "text": text[m1]},
            {"pmid": c0, "role": "counterfactual", "of": m0, "answer": counter, "text": text[c0]},
            {"pmid": c1, "role": "duplicate", "of": c0, "text": text[c1]},
        ],
    }


def reader_settings(tmp_path, endpoint: SimulatedEndpoint, strategy: str, **organize: str):
    spec = {"provider": "openai", "model": "reader", "base_url": endpoint.base_url}
    return load_settings(
        home=tmp_path / "home",
        fallback={"enabled": False},
        models={"query": spec | {"max_retries": 0}, "ensemble": [spec], "cache": "off"},
        organize={"strategy": strategy, **organize},
    )


def pinned(seed: int = 0) -> ReaderSettings:
    """The reader these checks rely on, pinned: its citations are those it reads."""
    return ReaderSettings(seed=seed, cite_mismatch=0.0, override=0.0)


async def organized(make_context, tmp_path, strategy: str, seed: int = 0, **organize) -> dict:
    planted = [plant(n, case) for n, case in enumerate(CASES)]
    with SimulatedEndpoint(0.0, planted=planted, reader=pinned(seed)) as endpoint:
        ctx = make_context(settings_=reader_settings(tmp_path, endpoint, strategy, **organize))
        report = await evaluate_organize(ctx, CASES)
        report["reader_kinds"] = {r["kind"] for r in endpoint.reader.records}
    return report


@pytest.mark.parametrize("seed", [0, 41])
async def test_corg_splits_counterfactuals_and_collapses_duplicates_in_fewer_calls(
    make_context, tmp_path, seed
):
    report = await organized(make_context, tmp_path, "corg", seed)
    assert report["questions"] == len(CASES) == 12
    assert report["counterfactual_split"] >= 0.9
    assert report["duplicate_collapse"] >= 0.9
    # Anchor 1 asks 3 pairs; its duplicate's pairs are mirrored; the counter pair is asked.
    assert report["relation_calls"] < report["naive_relation_calls"] == 6
    assert report["groups"] == 2 and report["d_f1"] >= 0.9 and report["ear"] >= 0.9
    assert {"relation", "group"} <= report["reader_kinds"]


@pytest.mark.parametrize("strategy", ["base", "separate"])
async def test_baselines_without_relations_fail_the_same_measures(make_context, tmp_path, strategy):
    report = await organized(make_context, tmp_path, strategy)
    # base answers the four together; separate keeps every duplicate: neither is CORG.
    assert report["duplicate_collapse"] == 0.0 and report["relation_calls"] == 0
    assert report["counterfactual_split"] == (0.0 if strategy == "base" else 1.0)


async def test_corg_without_its_relation_graph_neither_splits_nor_collapses(make_context, tmp_path):
    report = await organized(make_context, tmp_path, "corg", corg_relations="none")
    # The control: no pair asked, so all four contexts are dealt into one group.
    assert report["relation_calls"] == 0 and report["groups"] == 1
    assert report["counterfactual_split"] == 0.0 and report["duplicate_collapse"] == 0.0


async def test_the_aggregate_gives_each_side_with_its_own_citations(make_context, tmp_path):
    case = CASES[0]
    (m0, m1), (c0, c1) = (item["sources"] for item in case.items)
    planted = [plant(0, case, answers=("yes", "no"))]
    with SimulatedEndpoint(0.0, planted=planted, reader=pinned()) as endpoint:
        # The paper's aggregator: organize answers each group in one call.
        chosen = reader_settings(tmp_path, endpoint, "corg", corg_answers="organize")
        ctx = make_context(settings_=chosen)
        state = {"question": case.question, "qtype": "yesno", "contexts": case.contexts}
        update = await organize(state, Runtime(context=ctx))
    relation_prompts = [c["prompt"][-1]["content"] for c in update["calls"][:4]]
    # Whole passages: every relation call shows both of its passages to their last character.
    for context in case.contexts:
        assert any(context["abstract"] in prompt for prompt in relation_prompts)
    assert not any("cut at" in note for note in update["notes"])
    decision = update["decision"]
    assert decision["source"] == "organize" and decision["strategy"] == "corg"
    by_answer = {row["answer"]: row for row in decision["answers"]}
    assert set(by_answer) == {"yes", "no"}
    assert set(by_answer["yes"]["cited"]) <= {m0, m1} and set(by_answer["no"]["cited"]) <= {c0, c1}
    # Two contexts carry each side (the one cited, its duplicate collapsed into it): the
    # decision is plural, states both, and claims neither (below the 0.5 gate).
    assert [row["support"] for row in decision["answers"]] == [0.5, 0.5]
    assert decision["plural"] and set(decision["conflict"]) == {"yes", "no"}
    assert decision["share"] < 0.5 and "conflict" in decision["why"]
    assert decision["answers"][0]["answer"] == "yes" and decision["order"] == [m0, c0]
    assert decision["settings"]["relation_chars"] >= 2 * 1000
    assert {"top_k", "model", "reformulate", "max_concurrency"} <= set(decision["settings"])


async def test_by_default_the_reader_s_members_answer_each_side_and_the_answer_stays_plural(
    make_context, tmp_path
):
    # The design card's pipeline over real HTTP: "auto" runs CORG for the endpoint, whose
    # groups (each memory, its duplicate collapsed into it) the permute_vote members answer.
    case = CASES[0]
    (m0, _), (c0, _) = (item["sources"] for item in case.items)
    planted = [plant(0, case, answers=("yes", "no"))]
    with SimulatedEndpoint(0.0, planted=planted, reader=pinned()) as endpoint:
        chosen = reader_settings(tmp_path, endpoint, "auto")
        ctx = make_context(settings_=chosen)
        state = {"question": case.question, "qtype": "yesno", "contexts": case.contexts}
        state |= await organize(state, Runtime(context=ctx))
        state |= await ensemble(state, Runtime(context=ctx))
        kinds = Counter(r["kind"] for r in endpoint.reader.records)
    assert [g["pmids"] for g in state["groups"]] == [[m0], [c0]]
    # A one-passage group needs no permutations: one member call each, not K = 5.
    assert [m["group"] for m in state["members"]] == [1, 2]
    assert "group" not in kinds and kinds["relation"] >= 1
    assert [g["exact"] for g in state["groups"]] == [["yes"], ["no"]]
    decision = state["decision"]
    assert decision["source"] == "ensemble" and decision["strategy"] == "permute_vote"
    assert decision["plural"] and set(decision["conflict"]) == {"yes", "no"}
    assert decision["share"] == 0.0
