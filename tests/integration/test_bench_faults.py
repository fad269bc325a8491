"""`quorum bench faults`: the fault plan, what the clients make of each fault, one full drill."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from infra.models import ModelPool
from infra.settings import ModelSpec, load_settings
from lab.bench import faults
from lab.bench.fault_evidence import absorbed_llm
from lab.bench.faults import bench_faults, build_testset
from lab.simulate.server import FAULT_KINDS, FaultPlan, SimulatedEndpoint, request_key
from nodes.organize.strategies.dedupe import duplicates_schema
from prompts import template
from tests.support.data import GOLDEN

NO_FAULTS = dict.fromkeys(FAULT_KINDS, 0.0)


class Citation(BaseModel):
    pmid: str = Field(max_length=12, description="PubMed id")
    quote: str


def test_fault_plan_draws_are_seeded_and_follow_the_chances():
    plan = FaultPlan(seed=7)
    draws = [plan.draw(random.Random(7)) for _ in range(3)]
    assert len(set(draws)) == 1  # the same seed, the same first draw
    rng = random.Random(plan.seed)
    counts = Counter(plan.draw(rng) for _ in range(2000))
    again = random.Random(plan.seed)
    assert counts == Counter(plan.draw(again) for _ in range(2000))
    for kind, chance in plan.chances().items():
        assert counts[kind] > 0
        assert abs(counts[kind] / 2000 - chance) < 0.03, (kind, counts[kind])
    assert abs(counts[None] / 2000 - (1 - sum(plan.chances().values()))) < 0.04


@pytest.mark.parametrize(
    "bad", [{"server_error": -0.1}, {"server_error": 0.6, "rate_limit": 0.6}, {"empty": 1.5}]
)
def test_a_fault_plan_out_of_bounds_is_refused(bad):
    with pytest.raises(ValueError, match="fault chances"):
        FaultPlan(**bad)


@pytest.mark.parametrize("kind", ["server_error", "rate_limit", "timeout"])
def test_the_openai_client_retries_transient_faults(kind):
    plan = FaultPlan(**NO_FAULTS | {kind: 0.5}, seed=3, timeout_sleep_s=1.0)
    with SimulatedEndpoint(0.0, faults=plan) as endpoint:
        llm = ChatOpenAI(
            model="m", base_url=endpoint.base_url, api_key="x", max_retries=8, timeout=0.3
        )
        bound = llm.with_structured_output(Citation, method="json_schema")
        answers = [bound.invoke(f"question {i}") for i in range(4)]
    assert all(isinstance(a, Citation) for a in answers)
    faults = endpoint.faults_injected
    assert faults and {f["kind"] for f in faults} == {kind}
    assert endpoint.fault_counts()[kind] == len(faults)
    assert len(endpoint.requests) == 4 + len(faults)  # one request more per fault
    asked = {(r["key"], r["retry"]) for r in endpoint.requests}
    for fault in faults:  # the client sent the same request again, counting its retries
        assert (fault["key"], fault["retry"] + 1) in asked
        assert fault["model"] == "m" and fault["at"] > 0


@pytest.mark.parametrize("kind", ["malformed", "empty"])
# duplicates_schema: every field has a default, so JSON cut short, which LangChain's parser
# completes, validated as "no duplicates" and the trace showed no failed call.
@pytest.mark.parametrize("schema", [Citation, duplicates_schema(5)], ids=["required", "defaults"])
async def test_a_bad_output_is_an_error_reply_not_an_exception(kind, schema, tmp_path):
    plan = FaultPlan(**NO_FAULTS | {kind: 1.0})
    with SimulatedEndpoint(0.0, faults=plan) as endpoint:
        spec = ModelSpec(provider="openai", model="m", base_url=endpoint.base_url).model_dump()
        settings = load_settings(
            home=tmp_path, models={"query": spec, "ensemble": [spec], "cache": "off"}
        )
        model = ModelPool(settings).first("query")
        replies = [
            await model.structured(schema, [HumanMessage(content=f"question {i}")])
            for i in range(2)
        ]
    for reply in replies:  # malformed alternates invalid JSON and a schema violation
        assert reply.value is None and reply.error.startswith("unparseable output"), reply
    if kind == "malformed":  # what the endpoint said stays in the trace
        assert "simulated fault 1" in replies[0].raw
    variants = [f.get("variant") for f in endpoint.faults_injected]
    assert variants == (["invalid_json", "schema_violation"] if kind == "malformed" else [None] * 2)


def test_the_test_set_takes_ids_bodies_and_types_of_every_kind(tmp_path):
    assert build_testset(tmp_path / "t.json", 20, GOLDEN) == 20
    questions = json.loads((tmp_path / "t.json").read_text())["questions"]
    assert all(set(q) == {"id", "body", "type"} for q in questions)
    assert {q["type"] for q in questions} == {"yesno", "factoid", "list", "summary"}
    golden = json.loads(GOLDEN.read_text())["questions"]
    assert [q["id"] for q in questions] == [q["id"] for q in golden[:20]]  # the first, in order
    assert build_testset(tmp_path / "all.json", 100, GOLDEN) == len(golden) == 28
    with pytest.raises(FileNotFoundError, match="pass --input FILE"):
        build_testset(tmp_path / "u.json", 5, tmp_path / "missing.json")


def test_without_shared_data_the_default_test_set_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setattr(faults, "GOLDEN", tmp_path / "shared" / "data" / "bioasq")
    with pytest.raises(FileNotFoundError) as raised:
        build_testset(tmp_path / "t.json", 5)
    message = str(raised.value)
    assert "\n" not in message and message.endswith("pass --input FILE")
    assert "../shared" in message and not (tmp_path / "t.json").exists()


def test_each_fault_is_traced_to_what_absorbed_it():
    def call(node, text, started, error="unparseable output: empty"):
        return {
            "node": node,
            "model": "m",
            "prompt": [{"content": text}],
            "started": started,
            "error": error,
        }

    key = {text: request_key([text]) for text in ("a", "b", "c", "d")}
    requests = [
        {"request": 1, "key": key["a"], "retry": 0},  # 503, retried by the client
        {"request": 2, "key": key["a"], "retry": 1},
        {"request": 3, "key": key["b"], "retry": 0},  # empty: the member was dropped
        {"request": 4, "key": key["c"], "retry": 0},  # 429, then the batch was killed
        {"request": 5, "key": key["d"], "retry": 0},  # ok, replayed later as a failure
    ]
    faults = [
        {"request": 1, "kind": "server_error", "model": "m", "key": key["a"], "retry": 0, "at": 10},
        {"request": 3, "kind": "empty", "model": "m", "key": key["b"], "retry": 0, "at": 11},
        {"request": 4, "kind": "rate_limit", "model": "m", "key": key["c"], "retry": 0, "at": 12},
    ]
    threads = [
        {"calls": [call("ensemble", "b", 10.9), call("generate_query", "a", 9.9, error=None)]},
        {"calls": [call("ensemble", "d", 13.0, error=None), call("ensemble", "d", 20.0)]},
    ]
    runs = [{"exit": "killed", "requests": (1, 4)}, {"exit": 0, "requests": (5, 5)}]
    absorbed = absorbed_llm(faults, requests, threads, runs)
    assert absorbed["server_error"]["how"] == {"client_retry": 1}
    assert absorbed["empty"]["how"] == {"member_dropped": 1}
    assert absorbed["rate_limit"]["how"] == {"interrupted_by_kill_then_rerun": 1}
    assert all(entry["absorbed"] == entry["count"] for entry in absorbed.values() if "how" in entry)
    stray = absorbed["failed_calls_without_fault"]
    assert stray["count"] == stray["replayed_from_cache"] == 1 and stray["by_node"] == {
        "ensemble": 1
    }


def test_quorums_own_retries_and_corg_calls_are_traced_to_what_absorbed_them():
    # quorum's model client retries itself: the endpoint sees "retry 0" every time, and only
    # the call's record (its retries, its span) says that a request asked again was a retry.
    relation = template("organize_relation")[0]
    key = {text: request_key([text]) for text in ("a", relation, "b")}
    requests = [
        {"request": 1, "model": "m", "key": key["a"], "retry": 0},  # 500
        {"request": 2, "model": "m", "key": key["a"], "retry": 0},  # quorum's retry: ok
        {"request": 3, "model": "m", "key": key[relation], "retry": 0},  # empty
        {"request": 4, "model": "m", "key": key["b"], "retry": 0},  # 500, the call gave up
        {"request": 5, "model": "m", "key": key["b"], "retry": 0},  # a later run's, not a retry
    ]
    faults = [
        {"request": 1, "kind": "server_error", "model": "m", "key": key["a"], "retry": 0, "at": 10},
        {"request": 3, "kind": "empty", "model": "m", "key": key[relation], "retry": 0, "at": 12},
        {"request": 4, "kind": "server_error", "model": "m", "key": key["b"], "retry": 0, "at": 13},
    ]

    def call(node, text, started, *, error=None, retries=None):
        record = {"node": node, "model": "m", "prompt": [{"content": text}], "started": started}
        return record | {"latency_s": 1.0, "error": error, "retries": retries}

    threads = [
        {
            "calls": [
                call("generate_query", "a", 9.9, retries=1),
                call("organize", relation, 11.9, error="unparseable output: empty"),
                call("ensemble", "b", 30.0),  # the later run's call: it ran once
            ]
        }
    ]
    absorbed = absorbed_llm(faults, requests, threads, [{"exit": 0, "requests": (1, 5)}])
    assert absorbed["server_error"]["how"] == {"client_retry": 1, "unexplained": 1}
    assert absorbed["server_error"]["unexplained_requests"] == [4]
    assert absorbed["empty"]["how"] == {"corg_pair_read_as_unrelated": 1}


def test_a_killed_and_faulty_batch_answers_every_question_once(tmp_path):
    # Higher chances than the default plan, so that a short batch meets every kind of fault.
    plan = FaultPlan(
        server_error=0.08, rate_limit=0.06, timeout=0.05, malformed=0.08, empty=0.08, seed=5
    )
    lines: list[str] = []
    report = bench_faults(
        questions=12,
        seed=5,
        input_path=GOLDEN,  # 11B1's first 12 questions, as the default would take them
        plan=plan,
        keep=tmp_path / "run",
        log=lines.append,
    )
    assert report["answered"] == report["questions"] == 12
    assert report["duplicates"] == 0 and report["valid"], report.get("problems")
    injected, absorbed = report["faults_injected"], report["faults_absorbed"]
    assert injected["kill"] == 1 and injected["search_outage"] == 1
    for kind, count in injected.items():
        if count:
            assert absorbed[kind]["absorbed"] == absorbed[kind]["count"] == count, (kind, absorbed)
    assert absorbed["kill"]["how"]["resumed_from_journal"] > 0
    assert absorbed["server_error"]["how"].get("client_retry", 0) > 0
    assert sum(injected[k] > 0 for k in FAULT_KINDS) >= 4  # the batch met most kinds
    assert any("killed" in line for line in lines) and report["runs"] >= 2


async def test_a_bad_reply_is_not_served_again_from_the_response_cache(tmp_path):
    with SimulatedEndpoint(0.0, faults=FaultPlan(**NO_FAULTS | {"empty": 1.0})) as endpoint:
        spec = ModelSpec(provider="openai", model="m", base_url=endpoint.base_url).model_dump()
        settings = load_settings(home=tmp_path, models={"query": spec, "ensemble": [spec]})
        model = ModelPool(settings).first("query")
        first = await model.structured(Citation, [HumanMessage(content="question")])
        endpoint.faults = None  # the endpoint has recovered
        again = await model.structured(Citation, [HumanMessage(content="question")])
    assert first.error is not None
    assert again.error is None, f"{again.error} ({len(endpoint.requests)} request(s) reached it)"
