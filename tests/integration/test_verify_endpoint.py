"""The verifier over real HTTP: the simulator answers its prompt (a wiring harness, no judge)."""

import pytest

from infra.models import ModelPool
from infra.settings import ModelSpec, load_settings
from lab.simulate.server import FaultPlan, SimulatedEndpoint
from nodes.synthesize.verify import verifier_enabled, verify_answer

QUESTION = "Is losartan effective against brain atrophy in Alzheimer's disease?"
PASSAGES = [
    {
        "pmid": "201",
        "title": "Losartan in mild to moderate Alzheimer's disease",
        "abstract": "We randomised 211 patients. Losartan was not effective in reducing brain "
        "atrophy in patients with Alzheimer's disease. It was well tolerated.",
        "score": 1.0,
    },
    {
        "pmid": "202",
        "title": "CFTR and cystic fibrosis",
        "abstract": "The CFTR gene is mutated in cystic fibrosis.",
        "score": 0.5,
    },
]


def verifier(settings, url: str, method: str = "json_schema", **spec):
    endpoint = ModelSpec(
        provider="openai", model="verifier", base_url=url, structured_method=method, **spec
    )
    chosen = load_settings(home=settings.home, models={"ensemble": [endpoint], "cache": "off"})
    assert verifier_enabled(chosen)  # auto: on for an OpenAI-compatible endpoint
    return ModelPool(chosen).first("verify")


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
async def test_the_simulator_answers_the_verify_prompt_in_one_call(settings, method):
    with SimulatedEndpoint(0.0) as endpoint:
        model = verifier(settings, endpoint.base_url, method)
        refused, call = await verify_answer(
            model, QUESTION, "yesno", ["yes"], "Yes, it reduces atrophy.", PASSAGES, authors=()
        )
        assert endpoint.stats.calls == 1
        given, _ = await verify_answer(
            model,
            "Which gene is mutated in cystic fibrosis?",
            "factoid",
            ["CFTR"],
            "CFTR.",
            PASSAGES,
            authors=(),
        )
    assert call is not None and call["error"] is None and call["node"] == "verify"
    assert refused["status"] == "refused"
    first = refused["passages"][0]
    assert first["verdict"] == "contradicts" and first["quoted"]
    assert first["quote"].startswith("Losartan was not effective")
    assert given["status"] == "supported" and given["passages"][1]["quoted"]


async def test_a_failing_verifier_endpoint_is_not_verified(settings):
    plan = FaultPlan(server_error=1.0, rate_limit=0.0, timeout=0.0, malformed=0.0, empty=0.0)
    with SimulatedEndpoint(0.0, faults=plan) as endpoint:
        model = verifier(settings, endpoint.base_url, max_retries=0)
        verification, call = await verify_answer(
            model, QUESTION, "yesno", ["yes"], "Yes.", PASSAGES, authors=()
        )
    assert verification["status"] == "not verified"
    assert verification["why"].startswith("the verifier's call failed: ")
    assert call is not None and call["error"]
