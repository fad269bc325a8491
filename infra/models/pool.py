"""Chat models by role, built once per spec and shared between the roles that name it."""

from __future__ import annotations

import threading

from langchain_core.language_models import BaseChatModel

from infra.llm_cache import ReplyCache
from infra.models.chat import ChatModel
from infra.models.providers import INJECTED, make_chat_model, provider_for
from infra.settings import MODEL_ROLES, ModelSpec, Settings


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
        """Return the chat models of a role (query, refine, organize, ensemble, synthesis, …)."""
        specs = self._settings.models.for_role(role)
        if role in self._overrides:
            models = self._overrides[role]
            return [
                self._with_cache(ChatModel(spec=s, llm=m, provider=INJECTED))
                for s, m in zip(_pad(specs, models), models, strict=True)
            ]
        return [self._get(spec) for spec in specs]

    def first(self, role: str) -> ChatModel:
        """Return the single model of a one-model role."""
        return self.role(role)[0]

    def prepare(self) -> None:
        """Start what every configured model needs before its first call, in the background.

        The demo model's one-time de-quantization runs in a child process while the run imports
        its libraries and opens its index (infra/local_weights.py).
        """
        for role in MODEL_ROLES:
            if role not in self._overrides:
                for spec in self._settings.models.for_role(role):
                    provider_for(spec).prepare(spec, self._settings)

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
                self._built[spec.key] = self._with_cache(ChatModel(spec=spec, llm=llm, limit=limit))
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
    return provider_for(spec).calls_at_once(spec, settings, questions_in_flight)


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
