"""Running the QA graph: dependencies from settings, a checkpointed run, progress events."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphs.inputs import InputProblem, check_question
from graphs.qa import build_graph
from infra.checkpoints import async_saver, thread_exists
from infra.settings import Settings, SettingsError, secret_from_env
from nodes.records import call_tokens
from nodes.state import Call, InputState, QAState, Result

# NOTE: the models, the engine and the embedder are imported where they are used: a command
# that only checks settings or endpoints pays for none of them. Reading a trace needs none of
# this module (graphs/traces/read.py reads checkpoints without the graph).
if TYPE_CHECKING:
    from infra.models import ModelPool
    from infra.pubmed import PubMedClient
    from nodes.context import Context


def check_models(settings: Settings, *, probe: bool = True) -> None:
    """Fail early, in one line, on an endpoint that cannot work.

    No URL, its key unset, or (with `probe`) nothing answering there (infra/preflight.py).
    """
    from infra.models import provider_for
    from infra.preflight import check_endpoints
    from nodes.ensemble.strategies.registry import strategy_named

    strategy = strategy_named(settings.ensemble.strategy)
    if (why := strategy.refusal(settings)) is not None:
        raise SettingsError(why)  # refused now, not after query, search and rerank ran
    for role, spec in settings.models.by_role():
        if (problem := provider_for(spec).problem(role, spec)) is not None:
            raise SettingsError(problem)
    if probe:
        check_endpoints(settings)


def role_endpoints(settings: Settings) -> list[str]:
    """Return "role → endpoint (model)" for every role, or [] when every role is one model.

    What a user reads once on stderr before the first question: which endpoint judges the
    answers, and that it is not the one writing them. URLs are shown without credentials.
    """
    from infra.models import provider_for
    from infra.text import shown_url

    played = settings.models.by_role()
    if all(spec.same_model(played[0][1]) for _, spec in played):
        return []
    by_role: dict[str, list[str]] = {}
    for role, spec in played:
        url = provider_for(spec).endpoint(spec)
        where = f"{shown_url(url) if url else 'local model'} ({spec.model})"
        if where not in by_role.setdefault(role, []):
            by_role[role].append(where)
    return [f"{role} → {', '.join(places)}" for role, places in by_role.items()]


def pubmed_client(settings: Settings) -> PubMedClient | None:
    """Return the PubMed fallback's client, or None when the fallback may not ask NCBI.

    NCBI asks every E-utilities client for a contact e-mail: without `fallback.email` no
    request leaves the machine (the README's first command contacts nothing outside it).
    """
    fallback = settings.fallback
    if not (fallback.enabled and fallback.email):
        return None
    from infra.pubmed import PubMedClient

    key = secret_from_env(fallback.api_key_env)
    return PubMedClient(
        base_url=fallback.base_url,
        api_key=key.get_secret_value() if key else None,
        email=fallback.email,
        timeout_s=fallback.timeout_s,
    )


def build_context(
    settings: Settings, *, models: ModelPool | None = None, questions_in_flight: int = 1
) -> Context:
    """Build the run's dependencies from settings (the local model loads lazily on first call).

    `questions_in_flight`: how many questions share these models at once (a batch's
    concurrency); it sizes each endpoint's bound on calls in flight (`endpoint_limit`).
    """
    from infra.embeddings import BackgroundEmbedder
    from infra.models import ModelPool
    from infra.rerankers import load_reranker
    from infra.search.backends import open_backend
    from infra.snippets import load_scorer
    from nodes.context import Context

    if models is None:
        check_models(settings)
        models = ModelPool(settings, questions_in_flight=questions_in_flight)
    models.prepare()  # before the embedder's imports and the index: they leave a core free
    embedder = BackgroundEmbedder(settings.embeddings)
    search = open_backend(settings, embedder)
    pubmed = pubmed_client(settings)
    reranker = load_reranker(settings.rerank.cross_encoder, settings.embeddings.device)
    snippet_scorer = load_scorer(settings.snippets)
    return Context(
        settings=settings,
        search=search,
        embedder=embedder,
        models=models,
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


def graph_nodes(phase: str = "A+") -> tuple[str, ...]:
    """Return the phase's graph's nodes in the order they were added (no start or end)."""
    return tuple(n for n in build_graph(phase=phase).get_graph().nodes if not n.startswith("__"))


@dataclass
class Progress:
    """Where a run reports as it goes; every part is optional."""

    on_start: Callable[[str], None] | None = None
    """Called with the node's name as each node starts (what the run is doing now)."""
    on_event: Callable[[str, QAState], None] | None = None
    """Called with (node, update) as each node finishes."""
    on_progress: Callable[[dict[str, Any]], None] | None = None
    """Called with what nodes report while they run (e.g. ensemble members done)."""
    on_token: Callable[[str, str], None] | None = None
    """Called with (node, text) as a streaming model produces text."""
    stop: Callable[[], bool] | None = None
    """Asked as each node starts and finishes: true stops the run there (a first Ctrl-C): the
    node about to start never runs, and the thread is left without a result."""


@dataclass
class Outcome:
    """What a run left: its thread and its final state, with the result, calls and tokens."""

    thread_id: str
    values: QAState

    @property
    def result(self) -> Result:
        """Return finalize's result with the thread id ({} when the run did not get there)."""
        result = dict(self.values.get("result") or {})
        return result | {"thread_id": self.thread_id} if result else result

    @property
    def calls(self) -> list[Call]:
        """Return every model call the run made."""
        return list(self.values.get("calls") or [])

    @property
    def tokens(self) -> int:
        """Return the run's input plus output tokens."""
        return sum(call_tokens(c) for c in self.calls)


class GraphRunner:
    """The one door to the graph: one compiled graph over one checkpointer, runs through it.

    Every caller — ask, chat, serve, `bioasq run`, evaluations, benchmarks, trace step and
    replay — opens one (a batch keeps it open for all its questions) and runs questions with
    `run`; trace step and replay use `graph` for LangGraph's own stepping. A given
    `checkpointer` (the evaluations' in-memory one) replaces the settings' SQLite file.
    """

    def __init__(
        self, settings: Settings, *, phase: str = "A+", checkpointer: Any | None = None
    ) -> None:
        self.settings = settings
        self.phase = phase
        self._given = checkpointer
        self._opened: Any = None
        self.graph: Any = None

    async def __aenter__(self) -> GraphRunner:
        saver = self._given
        if saver is None:
            self._opened = async_saver(self.settings.checkpoint_path)
            saver = await self._opened.__aenter__()
        self.graph = build_graph(checkpointer=saver, phase=self.phase)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._opened is not None:
            await self._opened.__aexit__(*exc)

    async def run(
        self,
        context: Context,
        inputs: InputState,
        *,
        thread_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> Outcome:
        """Run the graph on `inputs` (question, qtype, …) in a new thread; return its outcome."""
        thread_id = thread_id or uuid.uuid4().hex
        tags = {"phase": self.phase}
        config = thread_config(
            thread_id, str(inputs.get("question", "")), **tags, **(metadata or {})
        )
        if progress is None:
            await self.graph.ainvoke(inputs, config, context=context)
        else:
            await self._stream(context, inputs, config, progress)
        final = await self.graph.aget_state(config)
        return Outcome(thread_id, QAState(**final.values))

    async def _stream(
        self, context: Context, inputs: InputState, config: dict[str, Any], sink: Progress
    ) -> None:
        modes = ["updates"] + (["tasks"] if sink.on_start or sink.stop else [])
        modes += (["custom"] if sink.on_progress else []) + (["messages"] if sink.on_token else [])
        async for mode, chunk in self.graph.astream(
            inputs, config, context=context, stream_mode=modes
        ):
            if mode == "updates":
                for node, values in chunk.items():
                    if sink.on_event is not None:
                        sink.on_event(node, values or {})
                if sink.stop is not None and sink.stop():
                    break  # leaving the stream cancels what the graph would start next
            elif mode == "tasks":
                # A task's start carries its input; its result event carries "result" instead.
                if "input" in chunk and not chunk["name"].startswith("__"):
                    if sink.stop is not None and sink.stop():
                        break  # this node was about to run: it does not
                    if sink.on_start is not None:
                        sink.on_start(chunk["name"])
            elif mode == "custom" and sink.on_progress is not None:
                sink.on_progress(chunk)
            elif mode == "messages" and sink.on_token is not None:
                message, info = chunk
                text = message.content if isinstance(message.content, str) else ""
                if text:
                    sink.on_token(info.get("langgraph_node", ""), text)


async def run_question(
    settings: Settings,
    question: str,
    qtype: str | None = None,
    *,
    context: Context | None = None,
    thread_id: str | None = None,
    progress: Progress | None = None,
    inputs: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[str, Result]:
    """Answer one question in a checkpointed thread; return (thread_id, result).

    Args:
        settings: Settings of the run.
        question: The question.
        qtype: BioASQ type, detected when None.
        context: Dependencies; built from settings when None.
        thread_id: The checkpoint thread (a new one when None; a used one is refused).
        progress: Where the run reports as it goes.
        inputs: More input fields (e.g. the conversation history).
        metadata: Stored with the thread's checkpoints (e.g. the conversation it belongs to).
    """
    question = check_question(question)
    context = context or build_context(settings)
    if thread_id and thread_exists(settings.checkpoint_path, thread_id):
        # A run's state accumulates (queries, attempts, fallback pool): one question per thread.
        raise InputProblem(f"thread {thread_id!r} already holds a run; use a new thread id")
    state: InputState = {"question": question, "qtype": qtype, **(inputs or {})}
    async with GraphRunner(settings) as runner:
        outcome = await runner.run(
            context, state, thread_id=thread_id, metadata=metadata, progress=progress or Progress()
        )
    return outcome.thread_id, outcome.result | {"thread_id": outcome.thread_id}
