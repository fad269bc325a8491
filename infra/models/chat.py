"""A configured chat model with the few calls nodes make: structured replies and likelihoods.

What differs by provider (how a reply is asked for, whether text can be scored) is the
provider's (providers.py); what every model shares — the reply cache, parsing, a reply cut off
at the token limit asked again tighter, errors as values — is here.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from infra.likelihood import EchoedLikelihood
from infra.llm_cache import ReplyCache
from infra.models.providers import Provider, first_line, provider_for
from infra.models.retries import Health, RetriesSpent, with_retries
from infra.settings import ModelSpec
from infra.structured import (
    BRIEF,
    SHOWN_OVER_LONG,
    Reply,
    Schema,
    UnparsedReply,
    add_usage,
    over_long,
    parse_json_reply,
    reply_text,
    tightened,
    was_cut_off,
)
from infra.text import clip, shown_url

UNPARSEABLE = "unparseable output"
"""How a call's error begins when the model answered but not in the shape asked: the model was
reached (unlike a connection, HTTP or key error). Either way a run in which no answering call
parsed is a model failure (nodes/finalize.model_failure), not thin evidence."""

T = TypeVar("T")


@dataclass
class ChatModel:
    """A configured chat model with the few calls nodes make."""

    spec: ModelSpec
    llm: BaseChatModel
    limit: int = 4
    """How many calls to this model may be in flight at once (pool.endpoint_limit)."""
    cache: ReplyCache | None = None
    """Where parsed replies are kept, when the cache policy allows."""
    cache_sampled: bool = False
    """Whether sampled calls (temperature > 0) may be served from the cache too."""
    echoed: EchoedLikelihood | None = None
    """An endpoint's prompt log-probabilities, checked by a probe before the first score."""
    provider: Provider | None = None
    """How this model is asked (providers.py); found from the spec and the model when None."""
    health: Health = field(default_factory=Health)
    """Whether the endpoint answers lately: a busy one is tried again (retries.py)."""
    _loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = field(
        default_factory=weakref.WeakKeyDictionary, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.provider is None:
            self.provider = provider_for(self.spec, self.llm)

    def on_this_loop(self, name: str, make: Callable[[], T]) -> T:
        """Return this model's `name` object for the running event loop, made on first use.

        A semaphore or an HTTP client belongs to the loop it was first used on: chat, serve
        and the tests run more than one loop in a process, and none may share them.
        """
        kept = self._loops.setdefault(asyncio.get_running_loop(), {})
        if name not in kept:
            kept[name] = make()
        return kept[name]

    @property
    def semaphore(self) -> asyncio.Semaphore:
        """Return the running loop's bound on calls in flight to this model."""
        return self.on_this_loop("semaphore", lambda: asyncio.Semaphore(self.limit))

    @property
    def name(self) -> str:
        """Return the model's display name."""
        return self.spec.model

    @property
    def endpoint(self) -> str:
        """Return where the model answers: its URL (never a key or password), or "local model"."""
        url = provider_for(self.spec).endpoint(self.spec)
        return shown_url(url) if url else "local model"

    @property
    def context_chars(self) -> int:
        """Return how many characters of each passage this model is shown."""
        # The spec's provider's budget, also for a model injected in its place (tests).
        return self.spec.context_chars or provider_for(self.spec).context_chars

    @property
    def _provider(self) -> Provider:
        assert self.provider is not None  # set in __post_init__
        return self.provider

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
                    # usage is filled as the call goes, so a reply that does not parse still
                    # shows the retries and tokens it took (the trace and the fault drill read
                    # them).
                    value, raw = await self._parsed_call(schema, list(messages), params, usage)
                if key is not None and self.cache is not None:  # only what parsed is kept
                    spent = {k: v for k, v in usage.items() if k != "retries"}  # this call's
                    kept = {"value": value.model_dump(mode="json"), "raw": raw, "usage": spent}
                    await asyncio.to_thread(self.cache.put, key, kept)
            error = None
        except UnparsedReply as exc:
            value, error, raw = None, f"{UNPARSEABLE}: {exc}", exc.raw
        except (ValidationError, ValueError) as exc:
            value, error = None, f"{UNPARSEABLE}: {first_line(exc)}"
        except RetriesSpent as exc:
            said = self._provider.failure(exc.last, self.spec, self.endpoint)
            value, error = None, f"{said}; {exc}"
        except Exception as exc:
            value, error = None, self._provider.failure(exc, self.spec, self.endpoint)
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
            endpoint=self.endpoint,
            retries=int(usage.get("retries", 0)),
        )

    def _shown_method(self) -> str | None:
        """Return "<method> (<why>)" when this endpoint is asked with a negotiated method."""
        return self._provider.method_note(self.spec)

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
        return await self._provider.loglikelihood(self, context, continuation)

    async def _parsed_call(
        self, schema: type[Schema], messages: list[BaseMessage], params: dict, usage: dict
    ) -> tuple[Schema, str]:
        """Call and parse into `usage`; a reply cut off at the limit is asked again, tighter."""
        limit = params.get("max_tokens") or self.spec.max_tokens
        bound: dict[str, Any] = schema.model_json_schema()
        for attempt in (1, 2):
            message: AIMessage | None = None
            try:
                message = await self._call(bound, messages, params, usage)
                raw = reply_text(message)
                add_usage(usage, message)
                return parse_json_reply(schema, raw, message), raw
            except (UnparsedReply, ValidationError, ValueError) as exc:
                counted = message is not None  # the call returned: its usage is in
                message = getattr(exc, "message", None) or message
                if not was_cut_off(message, limit):
                    said = getattr(exc, "raw", None) or reply_text(message)
                    if (over := over_long(bound, said)) is not None:
                        # The client's own parser failed first: the length is what went wrong.
                        raise UnparsedReply(over, clip(said, SHOWN_OVER_LONG), message) from None
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
        self, schema: dict[str, Any], messages: list[BaseMessage], params: dict, usage: dict
    ) -> AIMessage:
        """Ask once, and again while the endpoint is busy rather than down (retries.py)."""
        tries = 0

        async def once() -> AIMessage:
            nonlocal tries
            tries += 1
            return await self._provider.reply(self, schema, messages, params)

        try:
            message = await with_retries(
                once, health=self.health, max_retries=self.spec.max_retries
            )
        finally:
            # Counted however the call ends: a retried call whose last reply does not parse,
            # or whose budget is spent, still shows its retries in the trace.
            if tries > 1:
                usage["retries"] = usage.get("retries", 0) + tries - 1
        return message
