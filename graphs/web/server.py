"""`quorum serve`: a local web page to chat with the corpus and step through each turn's nodes.

Endpoints (JSON unless said; every error is `{"error": "<one line>"}` with a 4xx/5xx status):

    GET  /                                  the page (graphs/web/; works offline)
    GET  /api/health                        {"status": "ok"}; answers while turns run
    GET  /api/graph                         {"first", "labels", "next", "idle"}: progress words
    POST /api/conversations                 {"id"}: a new conversation
    GET  /api/conversations/{id}            {"id", "turns"}: the turns so far, as answer events
    POST /api/conversations/{id}/turns      {"question"} -> text/event-stream of one turn
    GET  /api/documents/{pmid}              the stored document: title, abstract, year, …
    GET  /api/threads/{thread_id}/steps     {"thread_id", "steps"}: the run node by node

A turn streams server-sent events, JSON data each: `started` (at once), `status` (the models
are loading), `node` (a node finished: node, summary), `progress` (ensemble members done),
`token` (node, text), then `answer` or `error` (one line), and the stream ends.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from graphs.chat.conversation import Conversations, Turn, run_turn
from graphs.describe import (
    DEMO_NOTICE,
    LABELS,
    done_line,
    step_mark,
    summarize,
    trace_text,
)
from graphs.runtime import InputProblem, build_context, check_question
from graphs.traces.read import Step, UnknownThread, node_updates
from infra.settings import Settings, SettingsError, secret_from_env
from nodes.answer_view import (
    cited_evidence,
    exact_text,
    given_exact,
    retrieved_documents,
    support_text,
)
from nodes.context import Context
from nodes.describing import confidence_text
from nodes.records import model_failed
from nodes.state import QAState

WEB = Path(__file__).parent
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
KEEPALIVE_S = 15.0
# NOTE: the page loads nothing from elsewhere; the policy makes the browser hold it to that.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "Cache-Control": "no-cache",
}
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")
PMID = re.compile(r"\d{1,12}")

log = logging.getLogger(__name__)


def _warm_context(settings: Settings) -> Context:
    """Build the context and its models, off the event loop (turns on the loop never stall)."""
    context = build_context(settings)
    context.models.warm()
    return context


def is_loopback(host: str) -> bool:
    """Tell whether a listening address is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Ask(BaseModel):
    """A question for the next turn of a conversation."""

    question: str = Field(description="The user's words; a follow-up is read against the history.")


class _Problem(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class _State:
    """What the app's handlers share: settings, the lazily built context, the turn store."""

    def __init__(self, settings: Settings, context: Context | None, qtype: str | None = None):
        self.settings = settings
        self.qtype = qtype
        self.context = context
        self.store = Conversations.for_settings(settings)
        self.busy: set[str] = set()
        self.tasks: set[asyncio.Task] = set()
        self._loading = asyncio.Lock()
        names = [spec.api_key_env for _, spec in settings.models.by_role()]
        names += [settings.fallback.api_key_env, settings.search.elasticsearch_api_key_env]
        secrets = (secret_from_env(n) for n in names if n)
        values = {s.get_secret_value() for s in secrets if s}
        # A too-short "secret" would blank out ordinary words; real keys are long.
        self.secrets = sorted((v for v in values if len(v) >= 8), key=len, reverse=True)

    async def ready(self, emit: Callable[[str, dict[str, Any]], None] | None = None) -> Context:
        async with self._loading:
            if self.context is None:
                if emit is not None:
                    emit("status", {"message": "loading models and index"})
                self.context = await asyncio.to_thread(_warm_context, self.settings)
        return self.context

    def dumps(self, data: Any) -> str:
        text = json.dumps(data, ensure_ascii=False, default=str)
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def json(self, data: Any, status: int = 200) -> Response:
        return Response(self.dumps(data), status_code=status, media_type="application/json")


def create_app(
    settings: Settings,
    context: Context | None = None,
    *,
    allowed_hosts: Sequence[str] = LOOPBACK_NAMES,
    qtype: str | None = None,
) -> FastAPI:
    """Build the web app.

    Args:
        settings: Settings of every run.
        context: Dependencies of the runs; built from settings on first use when None.
        allowed_hosts: Host headers served (loopback names by default, against DNS rebinding);
            `["*"]` for any.
        qtype: The BioASQ type every turn is answered as (detected when None).
    """
    state = _State(settings, context, qtype)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        for task in list(state.tasks):
            task.cancel()
        await asyncio.gather(*state.tasks, return_exceptions=True)
        state.store.close()

    app = FastAPI(title="quorum", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.mount("/static", StaticFiles(directory=WEB), name="static")

    @app.exception_handler(HTTPException)
    async def http_problem(_: Request, exc: HTTPException) -> Response:
        return state.json({"error": str(exc.detail)}, exc.status_code)

    @app.exception_handler(_Problem)
    async def problem(_: Request, exc: _Problem) -> Response:
        return state.json({"error": str(exc)}, exc.status)

    @app.exception_handler(InputProblem)
    async def input_problem(_: Request, exc: InputProblem) -> Response:
        return state.json({"error": str(exc)}, 400)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return state.json({"error": f"{where or 'request'}: {first.get('msg', 'invalid')}"}, 422)

    @app.exception_handler(Exception)
    async def failed(_: Request, exc: Exception) -> Response:
        return state.json({"error": _one_line(exc)}, 500)

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(WEB / "index.html", headers=PAGE_HEADERS)

    @app.get("/api/health")
    async def health() -> Response:
        return state.json({"status": "ok", "running": len(state.busy)})

    @app.get("/api/graph")
    async def graph() -> Response:
        demo = state.settings.models.uses_demo_model()
        return state.json({"labels": LABELS, "demo_notice": DEMO_NOTICE if demo else None})

    @app.post("/api/conversations")
    async def new_conversation() -> Response:
        return state.json({"id": Conversations.new_id()}, 201)

    @app.get("/api/conversations/{conversation}")
    async def conversation_turns(conversation: str) -> Response:
        _check_id(conversation, "conversation")
        turns = await asyncio.to_thread(state.store.turns, conversation)
        return state.json({"id": conversation, "turns": [_answer(t) for t in turns]})

    @app.post("/api/conversations/{conversation}/turns")
    async def ask(conversation: str, body: Ask) -> StreamingResponse:
        _check_id(conversation, "conversation")
        question = check_question(body.question)
        if conversation in state.busy:
            raise _Problem(409, "this conversation is still answering its last question")
        state.busy.add(conversation)
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def emit(event: str, data: dict[str, Any]) -> None:
            queue.put_nowait(f"event: {event}\ndata: {state.dumps(data)}\n\n")

        emit("started", {"conversation": conversation, "asked": question})
        task = asyncio.create_task(_run(state, conversation, question, emit, queue))
        state.tasks.add(task)
        task.add_done_callback(state.tasks.discard)
        return StreamingResponse(
            _drain(queue),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get("/api/documents/{pmid}")
    async def document(pmid: str) -> Response:
        if not PMID.fullmatch(pmid):
            raise _Problem(400, f"not a PMID: {pmid[:40]!r}")
        context = await state.ready()
        found = await asyncio.to_thread(context.search.fetch, [pmid])
        if not found:
            raise _Problem(404, f"PMID {pmid} is not in the index")
        keys = ("pmid", "title", "abstract", "year", "journal", "mesh")
        return state.json({k: found[0].get(k) for k in keys})

    @app.get("/api/threads/{thread_id}/steps")
    async def steps(thread_id: str) -> Response:
        _check_id(thread_id, "thread id")
        try:
            found = await asyncio.to_thread(node_updates, state.settings, thread_id)
        except UnknownThread:
            raise _Problem(404, f"no run with thread id {thread_id!r}") from None
        return state.json({"thread_id": thread_id, "steps": [_step(s) for s in found]})

    return app


def _one_line(exc: Exception) -> str:
    first = str(exc).splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}"[:500]


def _check_id(value: str, what: str) -> None:
    if not ID.fullmatch(value):
        raise _Problem(400, f"not a {what}: {value[:40]!r}")


async def _drain(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
    while True:
        try:
            item = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
        except TimeoutError:
            yield ": keepalive\n\n"
            continue
        if item is None:
            return
        yield item


async def _run(
    state: _State,
    conversation: str,
    question: str,
    emit: Callable[[str, dict[str, Any]], None],
    queue: asyncio.Queue[str | None],
) -> None:
    # NOTE: the turn runs on even if the browser goes away, so the conversation stays whole.

    def on_start(node: str) -> None:
        emit("start", {"node": node})

    def on_event(node: str, update: QAState) -> None:
        emit(
            "node",
            {
                "node": node,
                "line": done_line(node, update),
                "mark": step_mark(node, update),
                "summary": summarize(node, update),
            },
        )

    def on_token(node: str, text: str) -> None:
        emit("token", {"node": node, "text": text})

    try:
        context = await state.ready(emit)
        turn = await run_turn(
            state.settings,
            context,
            state.store,
            conversation,
            question,
            state.qtype,
            on_start=on_start,
            on_event=on_event,
            on_progress=lambda p: emit("progress", p),
            on_token=on_token,
        )
        if model_failed(turn.result):  # as `ask` exits 1: an error, never shown as an answer
            reason = turn.result.get("insufficient_reason") or "no model gave a usable answer"
            emit("error", {"message": f"no answer: {reason} (thread {turn.thread_id})"})
        else:
            emit("answer", _answer(turn))
    except (InputProblem, SettingsError) as exc:
        emit("error", {"message": str(exc)})
    except Exception as exc:
        log.exception("turn failed in %s", conversation)
        emit("error", {"message": _one_line(exc)})
    finally:
        state.busy.discard(conversation)
        queue.put_nowait(None)


def _answer(turn: Turn) -> dict[str, Any]:
    """Return a turn's answer as the page shows it, in the words of graphs/describe.py.

    `evidence` is what the answer cites (each with its supporting sentence); `documents` is
    what was retrieved, in retrieval order, each marked whether it is cited.
    """
    result = turn.result
    return {
        "turn": turn.number,
        "thread_id": turn.thread_id,
        "asked": turn.asked,
        "question": turn.question,
        "rewritten": turn.question != turn.asked,
        "type": result.get("type"),
        "exact_answer": given_exact(result),
        "exact_text": exact_text(given_exact(result)),
        "ideal_answer": result.get("ideal_answer"),
        "insufficient": bool(result.get("insufficient")),
        "insufficient_reason": result.get("insufficient_reason"),
        "confidence": result.get("confidence"),
        "model_confidence": result.get("model_confidence"),
        "confidence_text": confidence_text(result),
        "support_text": support_text(result),
        "verified": (result.get("support") or {}).get("verified"),
        "evidence": [asdict(row) for row in cited_evidence(result)],
        "evidence_kept": "evidence" in result,
        "documents": [asdict(row) for row in retrieved_documents(result)],
        "snippets": result.get("snippets") or [],
    }


def _step(step: Step) -> dict[str, Any]:
    lines, covered = trace_text(step["node"], step["update"])
    return {**step, "lines": lines, "described": sorted(covered)}
