"""In-process fakes: a scripted chat model that answers per prompt template, a hash embedder."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from lab.simulate.verify import verify_reply
from prompts import template_of


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


# The reply key `script()` takes for a prompt template, where tests name the call by its job
# rather than its template; any other template's key is its own name (a new node's prompt
# needs no line here).
SCRIPT_KEYS = {
    "generate_query": "query",
    "repair_query": "repair",
    "refine_query": "refine",
    "rewrite_question": "standalone",
    "organize_relation": "relation",
    "organize_pluralize": "pluralize",
    "organize_group": "group",
    "organize_retrieve": "retrieve",
    "organize_summarize": "summarize",
}


def node_of(messages: list[BaseMessage]) -> str:
    """Tell which call this is (a `script()` key), from the template the prompt was rendered from."""
    name = template_of(messages)
    if name is None:
        shown = " | ".join(str(m.content)[:80] for m in messages)
        raise AssertionError(f"a prompt rendered from no template: {shown}")
    return SCRIPT_KEYS.get(name, name)


def pmids_in(messages: list[BaseMessage]) -> list[str]:
    """Return the PMIDs of the passages shown in a prompt, in order."""
    return re.findall(r"PMID (\d+)", messages[-1].content)


def script(**replies: Any) -> ScriptedChatModel:
    """Build a scripted model: each node's reply is a dict (sent as JSON), a string, or a callable.

    A `verify` call with no reply scripted is answered by the simulator's word rule
    (lab/simulate/verify.py).
    """

    def respond(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
        node = node_of(messages)
        reply = replies.get(node)
        if reply is None and node == "repair":
            reply = replies.get("query")
        if reply is None and node == "verify":
            # The simulator's word rule (a harness): scripts that do not care still verify.
            reply = verify_reply([(m.type, str(m.content)) for m in messages])
        if callable(reply):
            reply = reply(messages, kwargs)
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, str) else json.dumps(reply)

    return ScriptedChatModel(respond=respond, calls=[])


class ScriptedReranker:
    """A cross-encoder that scores each passage by the score given for a word in it."""

    def __init__(self, by_word: dict[str, float]):
        self.by_word = by_word

    def score(self, query, passages):
        return np.array(
            [next((v for w, v in self.by_word.items() if w in p), 0.0) for p in passages],
            dtype=np.float32,
        )
