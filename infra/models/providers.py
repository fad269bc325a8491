"""Model providers by their settings name: how a spec becomes a chat model and is asked.

PROVIDERS is the one place that knows a provider: `models.*.provider` names a key (its settings
Literal is checked against these keys by a test), and everything that differs by provider —
building the model, checking its settings, the endpoint probed before the first question, how
many calls may be in flight, how structured output is asked for, whether it can score text —
is a method here. Adding a provider is one class and one entry.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from typing_extensions import override

from infra.embeddings import resolve_device
from infra.likelihood import EchoedLikelihood, LikelihoodUnavailable
from infra.local_models import LocalChatModel, load_local_chat
from infra.local_weights import ModelError, start_materializing, weights_of
from infra.models.failures import describe
from infra.models.http import (
    BadReply,
    NotStreamed,
    loop_client,
    remember_whole_replies,
    streams,
)
from infra.negotiation import (
    NEXT_METHOD,
    negotiated_method,
    negotiation_note,
    refuses_method,
    remember_method,
)
from infra.settings import ModelSpec, Settings, SettingsError, secret_from_env
from infra.structured import UnparsedReply, json_instruction
from infra.text import clip

T = TypeVar("T")


class ChatModel(Protocol):
    """What a provider reads of a configured model (infra/models/chat.py's ChatModel)."""

    spec: ModelSpec
    llm: BaseChatModel
    echoed: EchoedLikelihood | None

    @property
    def name(self) -> str:
        """Return the model's display name."""
        ...

    @property
    def semaphore(self) -> asyncio.Semaphore:
        """Return the running loop's bound on calls in flight to this model."""
        ...

    def on_this_loop(self, name: str, make: Callable[[], T]) -> T:
        """Return this model's `name` object for the running event loop, made on first use."""
        ...


OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where the OpenAI client sends a model with an api_key_env and no base_url."""


class Provider(ABC):
    """What quorum does differently for one kind of model."""

    context_chars: int = 6000
    """Characters of each passage the model is shown unless its spec says otherwise."""
    scores_by_spec: bool = False
    """Whether `loglikelihood` needs only the spec (an endpoint's echoed log-probabilities),
    so a model injected in place of this provider's can be scored too."""

    @abstractmethod
    def make(self, spec: ModelSpec, settings: Settings) -> BaseChatModel:
        """Build the LangChain chat model the spec describes."""

    @abstractmethod
    def owns(self, llm: BaseChatModel) -> bool:
        """Tell whether `llm` is a model this provider built (an injected one is not)."""

    def problem(self, role: str, spec: ModelSpec) -> str | None:
        """Return what in the spec cannot work, in one line, or None."""
        return None

    def prepare(self, spec: ModelSpec, settings: Settings) -> None:  # noqa: B027 (most need none)
        """Start, in the background, what the model needs before its first call (if anything)."""

    def endpoint(self, spec: ModelSpec) -> str | None:
        """Return the URL checked before the first question (infra/preflight.py), or None."""
        return None

    def calls_at_once(self, spec: ModelSpec, settings: Settings, questions: int) -> int:
        """Return how many calls may be in flight to this model (see pool.endpoint_limit)."""
        if spec.max_concurrency:
            return spec.max_concurrency
        return settings.ensemble.max_concurrency * max(1, questions)

    def method_note(self, spec: ModelSpec) -> str | None:
        """Return "<method> (<why>)" when structured output is asked another way than first."""
        return None

    @abstractmethod
    async def reply(
        self, model: ChatModel, schema: dict[str, Any], messages: list[BaseMessage], params: dict
    ) -> AIMessage:
        """Ask for JSON of `schema`; return the model's message (parsed in chat.py)."""

    async def loglikelihood(
        self, model: ChatModel, context: str, continuation: str
    ) -> tuple[float, int]:
        """Return log P(continuation | context) and the tokens read, or raise."""
        raise LikelihoodUnavailable(f"model {model.name!r} cannot score text")

    def likelihood_problem(self, spec: ModelSpec) -> str | None:
        """Return why this model cannot score orderings (MoI), or None when it can."""
        return None

    def failure(self, exc: BaseException, spec: ModelSpec, shown: str) -> str:
        """Return what a failed call to `shown` (its URL, no secrets) did, in one line."""
        return f"{type(exc).__name__}: {whole_line(exc)}"


class Local(Provider):
    """A Hugging Face model in-process (the demo's SmolLM2 by default): one call at a time."""

    context_chars = 500  # local models are small: show them less of each passage

    @override
    def make(self, spec: ModelSpec, settings: Settings) -> BaseChatModel:
        device = resolve_device(settings.embeddings.device)
        return load_local_chat(spec, settings.home / "models", device)

    @override
    def prepare(self, spec: ModelSpec, settings: Settings) -> None:
        # A GGUF not yet de-quantized is converted beside the run's start-up, not after it.
        start_materializing(weights_of(spec), settings.home / "models")

    @override
    def owns(self, llm: BaseChatModel) -> bool:
        return isinstance(llm, LocalChatModel)

    @override
    def calls_at_once(self, spec: ModelSpec, settings: Settings, questions: int) -> int:
        return 1  # it computes on this machine's CPU

    @override
    async def reply(
        self, model: ChatModel, schema: dict[str, Any], messages: list[BaseMessage], params: dict
    ) -> AIMessage:
        return await model.llm.ainvoke(messages, json_schema=json.dumps(schema), **params)

    @override
    async def loglikelihood(
        self, model: ChatModel, context: str, continuation: str
    ) -> tuple[float, int]:
        async with model.semaphore:
            return await asyncio.to_thread(model.llm.loglikelihood, context, continuation)


class OpenAICompatible(Provider):
    """Any OpenAI-compatible endpoint through langchain-openai: OpenAI, vLLM, llama.cpp."""

    scores_by_spec = True

    @override
    def make(self, spec: ModelSpec, settings: Settings) -> BaseChatModel:
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
            # NOTE: local servers (vLLM, llama.cpp, Ollama) accept any key; the client insists.
            api_key=key if key is not None else "not-needed",
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            timeout=spec.timeout_s,
            # A streamed call (chat, the page) waits as long for its next piece of text as any
            # call for its reply: not langchain-openai's own 120 s, whatever timeout_s says.
            stream_chunk_timeout=spec.timeout_s,
            # quorum retries, not the OpenAI client: a call to a busy endpoint is tried again
            # within a budget (retries.py), and what failed is named (failures.py).
            max_retries=0,
        )

    @override
    def owns(self, llm: BaseChatModel) -> bool:
        from langchain_openai import ChatOpenAI

        return isinstance(llm, ChatOpenAI)

    @override
    def problem(self, role: str, spec: ModelSpec) -> str | None:
        if not spec.base_url and not spec.api_key_env:
            return f"models.{role} {spec.model!r}: set base_url or api_key_env"
        if spec.api_key_env and secret_from_env(spec.api_key_env) is None:
            return (
                f"models.{role} {spec.model!r}: environment variable {spec.api_key_env} is not set"
            )
        return None

    @override
    def endpoint(self, spec: ModelSpec) -> str | None:
        return (spec.base_url or OPENAI_BASE_URL).rstrip("/")

    @override
    def method_note(self, spec: ModelSpec) -> str | None:
        note = negotiation_note(spec)
        return f"{negotiated_method(spec)} ({note})" if note else None

    @override
    async def reply(
        self, model: ChatModel, schema: dict[str, Any], messages: list[BaseMessage], params: dict
    ) -> AIMessage:
        spec = model.spec
        url = self.endpoint(spec) or ""
        llm = await _on_this_loop(model, params, streams=streams(url))
        method = negotiated_method(spec)
        try:
            out = await _ask_structured(llm, schema, messages, method)
        except NotStreamed:
            # The server ignores `stream` (a stream was asked for because a page or the chat
            # shows text as it comes): ask this endpoint for whole replies from now on.
            remember_whole_replies(url)
            llm = await _on_this_loop(model, params, streams=False)
            out = await _ask_structured(llm, schema, messages, method)
        except Exception as exc:
            following = NEXT_METHOD.get(method)
            if following is None or not refuses_method(exc):
                raise
            remember_method(spec, following, f"{type(exc).__name__}: {whole_line(exc)}")
            out = await _ask_structured(llm, schema, messages, following)
        if out.get("parsing_error"):
            message = out.get("raw")
            text = getattr(message, "content", "") if message is not None else ""
            raise UnparsedReply(
                first_line(out["parsing_error"]), text if isinstance(text, str) else "", message
            )
        raw_message = out["raw"]
        raw_message.additional_kwargs["_parsed"] = out["parsed"]
        return raw_message

    @override
    async def loglikelihood(
        self, model: ChatModel, context: str, continuation: str
    ) -> tuple[float, int]:
        if not model.spec.prompt_logprobs:
            raise LikelihoodUnavailable(
                f"model {model.name!r} gives no prompt log-probabilities (set prompt_logprobs "
                "for an endpoint whose /completions echoes them, e.g. vLLM)"
            )
        if model.echoed is None:
            model.echoed = EchoedLikelihood(model.spec)
        async with model.semaphore:
            return await model.echoed.score(context, continuation)

    @override
    def failure(self, exc: BaseException, spec: ModelSpec, shown: str) -> str:
        return describe(exc, url=shown, key_env=spec.api_key_env, timeout_s=spec.timeout_s)

    @override
    def likelihood_problem(self, spec: ModelSpec) -> str | None:
        from infra.likelihood import refusal

        if not spec.prompt_logprobs:
            return (
                f"model {spec.model!r} gives none: set prompt_logprobs = true for an endpoint "
                "whose /completions echoes them (vLLM), or use a local model or another strategy"
            )
        why = refusal(spec)
        return f"model {spec.model!r}: {why}" if why and spec.model not in why else why


class Injected(Provider):
    """A chat model handed in rather than built (tests' scripted models): JSON asked in words."""

    @override
    def make(self, spec: ModelSpec, settings: Settings) -> BaseChatModel:
        raise ModelError("an injected model is given, never built")

    @override
    def owns(self, llm: BaseChatModel) -> bool:
        return True

    @override
    async def reply(
        self, model: ChatModel, schema: dict[str, Any], messages: list[BaseMessage], params: dict
    ) -> AIMessage:
        instruction = SystemMessage(content=json_instruction(schema))
        return await model.llm.ainvoke([instruction, *messages], **params)

    @override
    async def loglikelihood(
        self, model: ChatModel, context: str, continuation: str
    ) -> tuple[float, int]:
        named = provider_for(model.spec)
        if named.scores_by_spec:
            return await named.loglikelihood(model, context, continuation)
        raise LikelihoodUnavailable(
            f"model {model.name!r} gives no prompt log-probabilities (set prompt_logprobs for an "
            "endpoint whose /completions echoes them, e.g. vLLM)"
        )


PROVIDERS: dict[str, Provider] = {"local": Local(), "openai": OpenAICompatible()}
"""Every provider by its settings name (models.*.provider)."""
INJECTED = Injected()


def provider_for(spec: ModelSpec, llm: BaseChatModel | None = None) -> Provider:
    """Return the spec's provider, or Injected when `llm` is a model that provider did not build."""
    found = PROVIDERS.get(spec.provider)
    if found is None:
        raise SettingsError(
            f"unknown model provider {spec.provider!r}; choose {' or '.join(PROVIDERS)}"
        )
    return found if llm is None or found.owns(llm) else INJECTED


def make_chat_model(spec: ModelSpec, settings: Settings) -> BaseChatModel:
    """Build the LangChain chat model a spec describes."""
    return provider_for(spec).make(spec, settings)


async def _on_this_loop(model: ChatModel, params: dict, *, streams: bool) -> Any:
    """Return the model's ChatOpenAI on the running loop's HTTP client, with this call's params.

    Per-call parameters are set on a copy of the model: passed to the structured-output
    runnable's `ainvoke`, they never reached the request (its first step drops them), so a
    temperature asked for was silently the spec's.
    """
    llm = model.llm
    client = await loop_client()

    def bound() -> Any:
        root = llm.root_async_client.with_options(http_client=client, max_retries=0)
        update = {"root_async_client": root, "async_client": root.chat.completions}
        return llm.model_copy(update=update | {"http_async_client": client})

    here = model.on_this_loop("openai", bound)
    changes = dict(params) | ({} if streams else {"disable_streaming": True})
    return here.model_copy(update=changes) if changes else here


async def _ask_structured(
    llm: Any, schema: dict[str, Any], messages: list[BaseMessage], method: str
) -> dict[str, Any]:
    bound = llm.with_structured_output(schema, method=method, include_raw=True)
    if method == "json_mode":
        # JSON mode promises JSON, not which JSON: the schema has to be in the prompt.
        messages = [SystemMessage(content=json_instruction(schema)), *messages]
    try:
        return await bound.ainvoke(messages)
    except AssertionError:
        # The OpenAI library's stream helper asserts when a stream ends with no completion in
        # it (replies it does not stream are checked before it reads them: infra/models/http.py).
        raise BadReply(
            "answered a streamed request with events that hold no chat completion"
        ) from None


def whole_line(exc: BaseException, limit: int = 2000) -> str:
    """Return an error's whole message on one line (the server's own words reach the trace)."""
    return clip(" ".join(str(exc).split()) or type(exc).__name__, limit)


def first_line(exc: BaseException | str) -> str:
    """Return the first line of an error's message (its type's name when it has none)."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
