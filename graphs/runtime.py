"""Running the QA graph: dependencies from settings, a checkpointed run, progress events."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from graphs.inputs import InputProblem, check_question
from graphs.qa import build_graph
from infra.checkpoints import async_saver, thread_exists
from infra.embeddings import BackgroundEmbedder
from infra.likelihood import refusal as likelihood_refusal
from infra.models import ModelPool
from infra.preflight import check_endpoints
from infra.pubmed import PubMedClient
from infra.rerankers import load_reranker
from infra.search.backends import open_backend
from infra.settings import Settings, SettingsError, secret_from_env
from infra.snippets import load_scorer
from nodes.context import Context


def check_models(settings: Settings, *, probe: bool = True) -> None:
    """Fail early, in one line, on an endpoint that cannot work.

    No URL, its key unset, or (with `probe`) nothing answering there (infra/preflight.py).
    """
    if settings.ensemble.strategy == "moi":
        # MoI scores orderings by likelihood: refuse now, not after query, search and rerank ran.
        for spec in settings.models.for_role("ensemble"):
            if spec.provider == "openai" and not spec.prompt_logprobs:
                raise SettingsError(
                    f"ensemble.strategy 'moi' needs prompt log-probabilities, and model "
                    f"{spec.model!r} gives none: set prompt_logprobs = true for an endpoint whose "
                    "/completions echoes them (vLLM), or use a local model or another strategy"
                )
            if spec.provider == "openai" and (why := likelihood_refusal(spec)) is not None:
                raise SettingsError(f"ensemble.strategy 'moi': {why}")
    for role, spec in settings.models.by_role():
        if spec.provider != "openai":
            continue
        if not spec.base_url and not spec.api_key_env:
            raise SettingsError(f"models.{role} {spec.model!r}: set base_url or api_key_env")
        if spec.api_key_env and secret_from_env(spec.api_key_env) is None:
            raise SettingsError(
                f"models.{role} {spec.model!r}: environment variable {spec.api_key_env} is not set"
            )
    if probe:
        check_endpoints(settings)


def build_context(
    settings: Settings, *, models: ModelPool | None = None, questions_in_flight: int = 1
) -> Context:
    """Build the run's dependencies from settings (the local model loads lazily on first call).

    `questions_in_flight`: how many questions share these models at once (a batch's
    concurrency); it sizes each endpoint's bound on calls in flight (`endpoint_limit`).
    """
    if models is None:
        check_models(settings)
    embedder = BackgroundEmbedder(settings.embeddings)
    search = open_backend(settings, embedder)
    fallback = settings.fallback
    key = secret_from_env(fallback.api_key_env)
    pubmed = (
        PubMedClient(
            base_url=fallback.base_url,
            api_key=key.get_secret_value() if key else None,
            email=fallback.email,
            timeout_s=fallback.timeout_s,
        )
        if fallback.enabled
        else None
    )
    reranker = load_reranker(settings.rerank.cross_encoder, settings.embeddings.device)
    snippet_scorer = load_scorer(settings.snippets)
    return Context(
        settings=settings,
        search=search,
        embedder=embedder,
        models=models or ModelPool(settings, questions_in_flight=questions_in_flight),
        pubmed=pubmed,
        reranker=reranker,
        snippet_scorer=snippet_scorer,
    )


def thread_config(thread_id: str, question: str, **tags: Any) -> dict[str, Any]:
    """Return a checkpointed run's config: its thread, and the metadata `trace list` reads.

    The metadata holds the question, the tags given (a chat turn, a BioASQ id and phase) and the
    process running it (host, pid): a run with no result whose process is gone was interrupted.
    """
    metadata = {"question": question[:300], "host": socket.gethostname(), "pid": os.getpid()}
    return {"configurable": {"thread_id": thread_id}, "metadata": metadata | tags}


async def run_question(
    settings: Settings,
    question: str,
    qtype: str | None = None,
    *,
    context: Context | None = None,
    thread_id: str | None = None,
    on_start: Callable[[str], None] | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    on_token: Callable[[str, str], None] | None = None,
    inputs: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Answer one question in a checkpointed thread; return (thread_id, result).

    Args:
        settings: Settings of the run.
        question: The question.
        qtype: BioASQ type, detected when None.
        context: Dependencies; built from settings when None.
        thread_id: The checkpoint thread (a new one when None; a used one is refused).
        on_start: Called with the node's name as each node starts (what the run is doing now).
        on_event: Called with (node, update) as each node finishes.
        on_progress: Called with what nodes report while they run (e.g. ensemble members done).
        on_token: Called with (node, text) as a streaming model produces text.
        inputs: More input fields (e.g. the conversation history).
        metadata: Stored with the thread's checkpoints (e.g. the conversation it belongs to).
    """
    question = check_question(question)
    context = context or build_context(settings)
    if thread_id and thread_exists(settings.checkpoint_path, thread_id):
        # A run's state accumulates (queries, attempts, fallback pool): one question per thread.
        raise InputProblem(f"thread {thread_id!r} already holds a run; use a new thread id")
    thread_id = thread_id or uuid.uuid4().hex
    config = thread_config(thread_id, question, **(metadata or {}))
    state: dict[str, Any] = {"question": question, "qtype": qtype, **(inputs or {})}
    modes = ["updates"] + (["tasks"] if on_start else [])
    modes += (["custom"] if on_progress else []) + (["messages"] if on_token else [])
    async with async_saver(settings.checkpoint_path) as saver:
        graph = build_graph(checkpointer=saver)
        async for mode, chunk in graph.astream(state, config, context=context, stream_mode=modes):
            if mode == "updates":
                for node, values in chunk.items():
                    if on_event is not None:
                        on_event(node, values or {})
            elif mode == "tasks" and on_start is not None:
                # A task's start carries its input; its result event carries "result" instead.
                if "input" in chunk and not chunk["name"].startswith("__"):
                    on_start(chunk["name"])
            elif mode == "custom" and on_progress is not None:
                on_progress(chunk)
            elif mode == "messages" and on_token is not None:
                message, info = chunk
                text = message.content if isinstance(message.content, str) else ""
                if text:
                    on_token(info.get("langgraph_node", ""), text)
        final = await graph.aget_state(config)
    result = dict(final.values.get("result") or {})
    result["thread_id"] = thread_id
    return thread_id, result
