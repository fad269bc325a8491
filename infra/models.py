"""Chat models behind one small interface: local Hugging Face or any OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from infra.embeddings import resolve_device
from infra.likelihood import EchoedLikelihood, LikelihoodUnavailable
from infra.llm_cache import ReplyCache
from infra.local_models import LocalChatModel, ModelError, load_local_chat
from infra.negotiation import (
    NEXT_METHOD,
    negotiated_method,
    negotiation_note,
    refuses_method,
    remember_method,
)
from infra.settings import MODEL_ROLES, ModelSpec, Settings, secret_from_env
from infra.structured import (
    BRIEF,
    Reply,
    Schema,
    UnparsedReply,
    add_usage,
    json_instruction,
    parse_json_reply,
    reply_text,
    tightened,
    was_cut_off,
)

# Local models are small; show them less of each passage unless told otherwise.
UNPARSEABLE = "unparseable output"
"""How a call's error begins when the model answered but not in the shape asked: the model was
reached (unlike a connection, HTTP or key error), so its question is insufficient, not failed."""
LOCAL_CONTEXT_CHARS = 500
REMOTE_CONTEXT_CHARS = 6000


def make_chat_model(spec: ModelSpec, settings: Settings) -> BaseChatModel:
    """Build the LangChain chat model a spec describes."""
    if spec.provider == "local":
        device = resolve_device(settings.embeddings.device)
        return load_local_chat(spec, settings.home / "models", device)
    from langchain_openai import ChatOpenAI

    if not spec.base_url and not spec.api_key_env:
        raise ModelError(
            f"model {spec.model!r}: an OpenAI-compatible model needs base_url or api_key_env"
        )
    key = secret_from_env(spec.api_key_env)
    limiter = None
    if spec.requests_per_second:
        from langchain_core.rate_limiters import InMemoryRateLimiter

        limiter = InMemoryRateLimiter(
            requests_per_second=spec.requests_per_second,
            check_every_n_seconds=min(0.1, 1 / spec.requests_per_second),
            max_bucket_size=max(1.0, spec.requests_per_second),
        )
    return ChatOpenAI(
        model=spec.model,
        rate_limiter=limiter,
        base_url=spec.base_url,
        # NOTE: local servers (vLLM, llama.cpp, Ollama) accept any key; the client insists on one.
        api_key=key if key is not None else "not-needed",
        temperature=spec.temperature,
        max_tokens=spec.max_tokens,
        timeout=spec.timeout_s,
        # The OpenAI client retries 429, 5xx, timeouts and dropped connections with exponential
        # backoff (honouring Retry-After); a call that still fails comes back as a Reply error.
        max_retries=spec.max_retries,
    )


@dataclass
class ChatModel:
    """A configured chat model with the few calls nodes make."""

    spec: ModelSpec
    llm: BaseChatModel
    semaphore: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(4))
    cache: ReplyCache | None = None
    """Where parsed replies are kept, when the cache policy allows."""
    cache_sampled: bool = False
    """Whether sampled calls (temperature > 0) may be served from the cache too."""
    echoed: EchoedLikelihood | None = None
    """An endpoint's prompt log-probabilities, checked by a probe before the first score."""

    @property
    def name(self) -> str:
        """Return the model's display name."""
        return self.spec.model

    @property
    def context_chars(self) -> int:
        """Return how many characters of each passage this model is shown."""
        default = LOCAL_CONTEXT_CHARS if self.spec.provider == "local" else REMOTE_CONTEXT_CHARS
        return self.spec.context_chars or default

    async def structured(
        self,
        schema: type[Schema],
        messages: Sequence[BaseMessage],
        *,
        temperature: float | None = None,
    ) -> Reply:
        """Ask for an instance of `schema`; failures come back as a Reply with `error` set."""
        params: dict[str, Any] = {}
        if temperature is not None:
            params["temperature"] = temperature
        started, wall = time.perf_counter(), time.time()
        raw = ""
        usage: dict[str, int] = {}
        key = self._cache_key(schema, messages, params)
        # The cache is a file: read and written off the event loop, like any other disk I/O.
        stored = (
            await asyncio.to_thread(self.cache.get, key)
            if key is not None and self.cache is not None
            else None
        )
        try:
            if stored is not None:
                value = schema.model_validate(stored["value"])
                raw, usage = stored.get("raw", ""), dict(stored.get("usage") or {})
            else:
                async with self.semaphore:
                    started, wall = time.perf_counter(), time.time()
                    value, raw, usage = await self._parsed_call(schema, list(messages), params)
                if key is not None and self.cache is not None:  # only what parsed is kept
                    kept = {"value": value.model_dump(mode="json"), "raw": raw, "usage": usage}
                    await asyncio.to_thread(self.cache.put, key, kept)
            error = None
        except UnparsedReply as exc:
            value, error, raw = None, f"{UNPARSEABLE}: {exc}", exc.raw
        except (ValidationError, ValueError) as exc:
            value, error = None, f"{UNPARSEABLE}: {_first_line(exc)}"
        except Exception as exc:
            value, error = None, f"{type(exc).__name__}: {_whole(exc)}"
        return Reply(
            value=value,
            raw=raw,
            model=self.name,
            latency_s=time.perf_counter() - started,
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
            error=error,
            started=wall,
            prompt=[{"role": m.type, "content": str(m.content)} for m in messages],
            temperature=temperature,
            method=self._shown_method(),
        )

    def _shown_method(self) -> str | None:
        """Return "<method> (<why>)" when this endpoint is asked with a negotiated method."""
        note = negotiation_note(self.spec) if self.spec.provider == "openai" else None
        return f"{negotiated_method(self.spec)} ({note})" if note else None

    def _cache_key(
        self, schema: type[BaseModel], messages: Sequence[BaseMessage], params: dict
    ) -> str | None:
        """Return the reply cache's key for this call, or None when it must not be cached."""
        if self.cache is None:
            return None
        temperature = params.get("temperature", self.spec.temperature)
        if temperature != 0 and not self.cache_sampled:
            return None
        return ReplyCache.key(
            self.spec.key,
            schema.model_json_schema(),
            [(m.type, m.content) for m in messages],
            params,
        )

    async def loglikelihood(self, context: str, continuation: str) -> tuple[float, int]:
        """Return log P(continuation | context) and the tokens read.

        Local models compute it directly; endpoints need prompt log-probabilities.

        Raises:
            LikelihoodUnavailable: The model cannot score text (a chat-only endpoint).
        """
        if isinstance(self.llm, LocalChatModel):
            async with self.semaphore:
                return await asyncio.to_thread(self.llm.loglikelihood, context, continuation)
        if self.spec.provider == "openai" and self.spec.prompt_logprobs:
            if self.echoed is None:
                self.echoed = EchoedLikelihood(self.spec)
            async with self.semaphore:
                return await self.echoed.score(context, continuation)
        raise LikelihoodUnavailable(
            f"model {self.name!r} gives no prompt log-probabilities (set prompt_logprobs for an "
            "endpoint whose /completions echoes them, e.g. vLLM)"
        )

    async def _parsed_call(
        self, schema: type[Schema], messages: list[BaseMessage], params: dict
    ) -> tuple[Schema, str, dict[str, int]]:
        """Call and parse; a reply cut off at the token limit is asked again once, tighter."""
        limit = params.get("max_tokens") or self.spec.max_tokens
        bound: dict[str, Any] = schema.model_json_schema()
        usage: dict[str, int] = {}
        for attempt in (1, 2):
            message: AIMessage | None = None
            try:
                message = await self._call(bound, messages, params)
                raw = reply_text(message)
                add_usage(usage, message)
                return parse_json_reply(schema, raw, message), raw, usage
            except (UnparsedReply, ValidationError, ValueError) as exc:
                counted = message is not None  # the call returned: its usage is in
                message = getattr(exc, "message", None) or message
                if not was_cut_off(message, limit):
                    raise
                if not counted:
                    add_usage(usage, message)
                raw = reply_text(message)
                if attempt == 2:
                    raise UnparsedReply(
                        f"cut off at the {limit}-token limit, twice (the second time with every "
                        "field bound halved); raise max_tokens or use a larger model",
                        raw,
                    ) from None
                bound = tightened(bound)
                messages = [*messages[:-1], SystemMessage(content=BRIEF), messages[-1]]
        raise AssertionError("unreachable")

    async def _call(
        self, schema: dict[str, Any], messages: list[BaseMessage], params: dict
    ) -> AIMessage:
        llm = self.llm
        if isinstance(self.llm, LocalChatModel):
            return await llm.ainvoke(messages, json_schema=json.dumps(schema), **params)
        from langchain_openai import ChatOpenAI

        if isinstance(self.llm, ChatOpenAI):
            method = negotiated_method(self.spec)
            try:
                out = await _ask_structured(llm, schema, messages, params, method)
            except Exception as exc:
                following = NEXT_METHOD.get(method)
                if following is None or not refuses_method(exc):
                    raise
                remember_method(self.spec, following, f"{type(exc).__name__}: {_whole(exc)}")
                out = await _ask_structured(llm, schema, messages, params, following)
            if out.get("parsing_error"):
                message = out.get("raw")
                text = getattr(message, "content", "") if message is not None else ""
                raise UnparsedReply(
                    _first_line(out["parsing_error"]),
                    text if isinstance(text, str) else "",
                    message,
                )
            raw_message = out["raw"]
            raw_message.additional_kwargs["_parsed"] = out["parsed"]
            return raw_message
        # Any other chat model (tests' scripted models included): ask for JSON in words.
        instruction = SystemMessage(content=json_instruction(schema))
        return await llm.ainvoke([instruction, *messages], **params)


async def _ask_structured(
    llm: Any, schema: dict[str, Any], messages: list[BaseMessage], params: dict, method: str
) -> dict[str, Any]:
    bound = llm.with_structured_output(schema, method=method, include_raw=True)
    if method == "json_mode":
        # JSON mode promises JSON, not which JSON: the schema has to be in the prompt.
        messages = [SystemMessage(content=json_instruction(schema)), *messages]
    return await bound.ainvoke(messages, **params)


def _whole(exc: BaseException, limit: int = 2000) -> str:
    """Return an error's whole message on one line (the server's own words reach the trace)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


class ModelPool:
    """Chat models by role, built on first use and shared between roles with the same spec."""

    def __init__(
        self,
        settings: Settings,
        overrides: dict[str, list[BaseChatModel]] | None = None,
        *,
        questions_in_flight: int = 1,
    ):
        self._settings = settings
        self._overrides = overrides or {}
        self._questions = max(1, questions_in_flight)
        self._built: dict[str, ChatModel] = {}
        self._lock = threading.Lock()
        self._cache: ReplyCache | None = None

    def _with_cache(self, model: ChatModel) -> ChatModel:
        policy = self._settings.models.cache
        if policy == "off":
            return model
        if self._cache is None:
            self._cache = ReplyCache(self._settings.llm_cache_path)
        model.cache = self._cache
        model.cache_sampled = policy == "all"
        return model

    def role(self, role: str) -> list[ChatModel]:
        """Return the chat models of a role: query, refine, organize, ensemble or synthesis."""
        specs = self._settings.models.for_role(role)
        if role in self._overrides:
            models = self._overrides[role]
            return [
                self._with_cache(ChatModel(spec=s, llm=m))
                for s, m in zip(_pad(specs, models), models, strict=True)
            ]
        return [self._get(spec) for spec in specs]

    def first(self, role: str) -> ChatModel:
        """Return the single model of a one-model role."""
        return self.role(role)[0]

    def warm(self) -> None:
        """Build every role's models now (a local model loads here, not on a node's first call).

        Servers call this off their event loop: a model loaded inside a node would stall every
        other run on the loop meanwhile.
        """
        for role in MODEL_ROLES:
            self.role(role)

    def _get(self, spec: ModelSpec) -> ChatModel:
        with self._lock:
            if spec.key not in self._built:
                llm = make_chat_model(spec, self._settings)
                limit = endpoint_limit(spec, self._settings, self._questions)
                self._built[spec.key] = self._with_cache(
                    ChatModel(spec=spec, llm=llm, semaphore=asyncio.Semaphore(limit))
                )
            return self._built[spec.key]


def endpoint_limit(spec: ModelSpec, settings: Settings, questions_in_flight: int) -> int:
    """Return how many calls may be in flight to one endpoint (one model spec) at once.

    The one place that decides it: the endpoint's own limit (`max_concurrency` in its model
    spec) when it states one; otherwise ensemble.max_concurrency calls per question times the
    questions in flight, so a batch of N questions is never throttled below what N questions
    asked alone would get (one bound of 8 shared by a 16-question batch made a 50-question run
    against a 1 s endpoint take 45 s where 12.5 s was possible). A local model computes on this
    machine's CPU: one call at a time.
    """
    if spec.provider == "local":
        return 1
    if spec.max_concurrency:
        return spec.max_concurrency
    return settings.ensemble.max_concurrency * max(1, questions_in_flight)


def _pad(specs: list[ModelSpec], models: list[BaseChatModel]) -> list[ModelSpec]:
    """Give injected models a spec each, named after the model where it has a name."""
    out = []
    for i, model in enumerate(models):
        base = specs[min(i, len(specs) - 1)]
        name = (
            getattr(model, "model_name", None)
            or getattr(model, "name", None)
            or f"{base.model}#{i}"
        )
        out.append(base.model_copy(update={"model": str(name)}))
    return out
