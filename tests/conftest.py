"""Shared fixtures: settings rooted in tmp_path, a scripted chat model, a deterministic embedder."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from elasticsearch import Elasticsearch
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from infra.elasticsearch_server import ensure_running
from infra.models import ModelPool
from infra.search.embedded import EmbeddedIndex
from infra.settings import Settings, load_settings
from nodes.context import Context

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
PUBMED_FIXTURES = ROOT / "tests" / "fixtures" / "pubmed"
EFETCH_XML = (PUBMED_FIXTURES / "efetch_sample.xml").read_bytes()
ESEARCH_JSON = (PUBMED_FIXTURES / "esearch_sample.json").read_bytes()


class HashEmbedder:
    """Deterministic bag-of-words embedder: same words, same direction; no model needed."""

    name = "hash-64"
    dim = 64

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            digest = hashlib.md5(word.encode()).digest()
            vec[digest[0] % self.dim] += 1.0 if digest[1] % 2 else -1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return (
            np.stack([self._vector(t) for t in texts])
            if texts
            else np.zeros((0, self.dim), np.float32)
        )


class ScriptedChatModel(BaseChatModel):
    """A chat model whose reply is computed from the messages; it records every call."""

    respond: Callable[[list[BaseMessage], dict[str, Any]], str]
    calls: list[dict[str, Any]] = Field(default_factory=list)
    model_name: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        text = self.respond(list(messages), kwargs)
        self.calls.append({"messages": list(messages), "kwargs": kwargs, "reply": text})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def node_of(messages: list[BaseMessage]) -> str:
    """Tell which node's prompt this is, from its system message."""
    system = " ".join(m.content for m in messages if m.type == "system")
    for key, marker in (
        ("repair", "You fix PubMed search queries"),
        ("query", "You write PubMed search queries"),
        ("refine", "You relax PubMed search queries"),
        ("organize", "You compare numbered passages"),
        ("relation", "You compare two PubMed passages"),
        ("standalone", "You turn follow-up questions"),
        ("pluralize", "You rewrite questions"),
        ("group", "You answer for one group"),
        ("synthesize", "You are the final judge"),
        ("ensemble", "You answer biomedical questions"),
    ):
        if marker in system:
            return key
    raise AssertionError(f"unknown prompt: {system[:200]}")


def pmids_in(messages: list[BaseMessage]) -> list[str]:
    """Return the PMIDs of the passages shown in a prompt, in order."""
    return re.findall(r"PMID (\d+)", messages[-1].content)


def script(**replies: Any) -> ScriptedChatModel:
    """Build a scripted model: each node's reply is a dict (sent as JSON), a string, or a callable."""

    def respond(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
        node = node_of(messages)
        reply = replies.get(node)
        if reply is None and node == "repair":
            reply = replies.get("query")
        if callable(reply):
            reply = reply(messages, kwargs)
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, str) else json.dumps(reply)

    return ScriptedChatModel(respond=respond, calls=[])


# The nodes a confident answer passes through, in order (no refinement, no fallback).
ANSWERING_NODES = [
    "generate_query",
    "search",
    "rerank",
    "organize",
    "ensemble",
    "synthesize",
    "finalize",
]

# Router bounds as generate_query copies them from default settings.
LIMITS = {
    "min_hits": 5,
    "max_refinements": 2,
    "min_confidence": 0.5,
    "max_attempts": 2,
    "max_fallbacks": 1,
    "min_contexts": 1,
}


DOCS = [
    {
        "pmid": "101",
        "title": "Mitochondria drive programmed cell death in lace plant leaves",
        "abstract": "Mitochondrial dynamics change early during programmed cell death in the lace plant. "
        "Cyclosporin A reduced perforation formation.",
        "year": 2011,
        "mesh": ["Mitochondria"],
    },
    {
        "pmid": "102",
        "title": "Mitochondrial permeability in plant cell death",
        "abstract": "Mitochondria release cytochrome c during plant programmed cell death.",
        "year": 2009,
    },
    {
        "pmid": "103",
        "title": "Lace plant leaf perforation",
        "abstract": "Perforations in lace plant leaves form by programmed cell death of areole cells.",
        "year": 2008,
    },
    {
        "pmid": "104",
        "title": "Chloroplasts in leaf senescence",
        "abstract": "Chloroplast degradation accompanies leaf senescence in many plants.",
        "year": 2010,
    },
    {
        "pmid": "105",
        "title": "Caspase-like proteases in plants",
        "abstract": "Plant cell death involves caspase-like activities and mitochondria.",
        "year": 2012,
    },
    {
        "pmid": "106",
        "title": "Aspirin and colorectal cancer",
        "abstract": "Aspirin use lowers colorectal cancer incidence in randomized trials.",
        "year": 2015,
    },
    {
        "pmid": "107",
        "title": "Statins after myocardial infarction",
        "abstract": "Statins reduce mortality after myocardial infarction.",
        "year": 2014,
    },
    {
        "pmid": "108",
        "title": "Cell death in leaves of the lace plant: a duplicate report",
        "abstract": "Mitochondrial dynamics change early during programmed cell death in the lace plant. "
        "Cyclosporin A reduced perforation formation.",
        "year": 2012,
    },
]


@pytest.fixture(scope="session")
def quorum_home(tmp_path_factory) -> Path:
    """One data directory per test session for what is slow to build (the de-quantized model)."""
    return tmp_path_factory.mktemp("quorum-home")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with every file under tmp_path and fallback search off."""
    return load_settings(home=tmp_path / "home", fallback={"enabled": False})


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def index(tmp_path: Path, embedder: HashEmbedder) -> EmbeddedIndex:
    """A small real tantivy index with hash vectors."""
    vectors = embedder.embed_documents([f"{d['title']}. {d['abstract']}" for d in DOCS])
    return EmbeddedIndex.build(
        tmp_path / "index", DOCS, vectors=vectors, embedding_model=embedder.name
    )


@pytest.fixture
def make_context(settings: Settings, index: EmbeddedIndex, embedder: HashEmbedder):
    """Build a Context whose every model role is the given scripted model(s)."""

    def make(
        model: BaseChatModel | None = None,
        *,
        ensemble: list[BaseChatModel] | None = None,
        settings_: Settings | None = None,
        pubmed: Any = None,
        **roles: BaseChatModel,
    ) -> Context:
        chosen = settings_ or settings
        overrides = {
            role: [model] for role in ("query", "refine", "organize", "synthesis") if model
        }
        overrides |= {role: [m] for role, m in roles.items()}
        if ensemble or model:
            overrides["ensemble"] = ensemble or [model]
        return Context(
            settings=chosen,
            search=index,
            embedder=embedder,
            models=ModelPool(chosen, overrides=overrides),
            pubmed=pubmed,
        )

    return make


@dataclass
class FakeEutils:
    """Records every request; scripted (status, headers, body) replies are served first."""

    base_url: str = ""
    requests: list[tuple[str, dict[str, list[str]], float]] = field(default_factory=list)
    script: dict[str, list[tuple[int, dict[str, str], bytes]]] = field(default_factory=dict)
    esearch_body: bytes = ESEARCH_JSON
    delay_s: float = 0.0

    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]

    def reply(self, path: str) -> tuple[int, dict[str, str], bytes]:
        if self.script.get(path):
            return self.script[path].pop(0)
        if path.endswith("/esearch.fcgi"):
            return 200, {"Content-Type": "application/json"}, self.esearch_body
        if path.endswith("/efetch.fcgi"):
            return 200, {"Content-Type": "text/xml"}, EFETCH_XML
        return 404, {}, b"not found"


@pytest.fixture
def eutils() -> Iterator[FakeEutils]:
    fake = FakeEutils()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlsplit(self.path)
            fake.requests.append((url.path, parse_qs(url.query), time.monotonic()))
            time.sleep(fake.delay_s)
            status, headers, body = fake.reply(url.path)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/entrez/eutils"
    yield fake
    server.shutdown()
    server.server_close()
    thread.join()


# --- a real Elasticsearch node, started on demand and shared by the session -----------------

WORK = Path(os.environ.get("QUORUM_ES_DIR") or ROOT / ".ci" / "work" / "elasticsearch")
PORT = int(os.environ.get("QUORUM_ES_PORT", "9200"))


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


def simulated_env(base_url: str, home: Path, **settings: str) -> dict[str, str]:
    """Return a `quorum` process environment whose every model is the simulated endpoint."""
    spec = {"provider": "openai", "model": "sim", "base_url": base_url}
    if key_env := settings.pop("api_key_env", None):
        spec["api_key_env"] = key_env
    return quorum_env(home) | {
        "QUORUM_MODELS__QUERY": json.dumps(spec),
        "QUORUM_MODELS__ENSEMBLE": json.dumps([spec]),
        "QUORUM_FALLBACK__ENABLED": "false",
        **settings,
    }


QUORUM = str(Path(sys.executable).parent / "quorum")
"""The installed `quorum` command."""


def quorum_env(home: Path) -> dict[str, str]:
    """Return this process's environment without QUORUM_* settings, rooted at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
    return env | {"QUORUM_HOME": str(home)}


def run_quorum(
    env: dict[str, str], *args: str, stdin: str | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run `quorum` as a user would, capturing its output."""
    return subprocess.run(
        [QUORUM, *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout
    )
