"""Integration fixtures: the real Elasticsearch node, a fake E-utilities server, junk model
endpoints, a shared home.

The in-process fakes (scripted models, hash embedder, small index) come from tests/support too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from lab.elasticsearch_server import ensure_running

# Fixtures are found by name: importing them here is what makes them available to these tests.
from tests.support.fixtures import embedder, index, make_context  # noqa: F401
from tests.support.servers import (
    PORT,
    WORK,
    FakeEutils,
    FixedReplies,
    serve_eutils,
    serve_fixed_replies,
)


@pytest.fixture(scope="session")
def quorum_home(tmp_path_factory) -> Path:
    """One data directory per test session for what is slow to build (the de-quantized model)."""
    return tmp_path_factory.mktemp("quorum-home")


@pytest.fixture
def eutils() -> Iterator[FakeEutils]:
    with serve_eutils() as fake:
        yield fake


@pytest.fixture
def junk_endpoint() -> Iterator[FixedReplies]:
    """An OpenAI-compatible endpoint whose every reply is `][{`."""
    with serve_fixed_replies("][{") as endpoint:
        yield endpoint


@pytest.fixture
def empty_endpoint() -> Iterator[FixedReplies]:
    """An OpenAI-compatible endpoint whose every reply is the empty string."""
    with serve_fixed_replies("") as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def es_url() -> str:
    return ensure_running(WORK, PORT)


@pytest.fixture(scope="session")
def admin(es_url: str) -> Iterator[Elasticsearch]:
    client = Elasticsearch(es_url, request_timeout=60)
    yield client
    client.close()


@pytest.fixture(scope="session")
def new_name(admin: Elasticsearch) -> Iterator:
    names: list[str] = []

    def make() -> str:
        names.append(f"quorum-test-{uuid.uuid4().hex[:12]}")
        return names[-1]

    yield make
    for name in names:
        admin.indices.delete(index=name, ignore_unavailable=True)
