"""The template name that rendered prompts carry stays on this side of the HTTP request.

The bodies are recorded on the client that sends them: the running loop's (infra/models/http.py),
which every call to an endpoint goes through, whatever client the ChatOpenAI was built with.
"""

from __future__ import annotations

import json

import httpx
import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from infra.models import ChatModel
from infra.models.http import loop_client
from infra.settings import ModelSpec
from lab.simulate.server import SimulatedEndpoint
from prompts import HERE, TEMPLATE_KEY, render, template_of, variables

TEMPLATES = sorted(path.stem for path in HERE.glob("*.md"))
METHODS = ["json_schema", "function_calling", "json_mode"]


class Verdict(BaseModel):
    answer: str


@pytest.mark.parametrize("method", METHODS)
async def test_the_template_marker_never_reaches_the_request_body(method):
    bodies: list[bytes] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(request.content)

    client = await loop_client()
    client.event_hooks = {**client.event_hooks, "request": [record]}
    with SimulatedEndpoint(0.0) as endpoint:
        spec = ModelSpec(
            provider="openai", model="sim", base_url=endpoint.base_url, structured_method=method
        )
        llm = ChatOpenAI(model="sim", base_url=endpoint.base_url, api_key="x")
        model = ChatModel(spec=spec, llm=llm)
        for name in TEMPLATES:
            marked = render(name, **{var: f"<{var}>" for var in variables(name)})
            unmarked = [m.model_copy(update={"response_metadata": {}}) for m in marked]
            assert template_of(marked) == name and template_of(unmarked) is None
            for messages in (marked, unmarked):
                reply = await model.structured(Verdict, messages)
                assert reply.error is None, reply.error

    assert len(bodies) == 2 * len(TEMPLATES)
    for with_marker, without in zip(bodies[::2], bodies[1::2], strict=True):
        assert with_marker == without
        assert TEMPLATE_KEY.encode() not in with_marker
        for message in json.loads(with_marker)["messages"]:
            assert set(message) == {"role", "content"}
