"""Settings of the answering methods: organize, ensemble strategies, synthesis, verify, fallback."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infra.settings.group import Group


class OrganizeSettings(Group):
    """Context organization before answering."""

    top_k: int = Field(10, ge=1, description="Contexts organized; the rest are not.")
    strategy: Literal[
        "auto", "dedupe", "corg", "base", "separate", "random", "kmeans", "retrieve", "summarize"
    ] = Field(
        "auto",
        description="'auto': 'corg' when the organize model is an OpenAI-compatible endpoint "
        "(provider 'openai'), 'dedupe' for a local model (CORG's pair calls on the 135M demo "
        "model take minutes a question; docs/methods.md), as verify.enabled 'auto' decides; "
        "'dedupe': one call labels duplicates; 'corg': the Context Organizer (pair relations, "
        "conflict-free groups, one answer per group, aggregated into the decision); the CORG "
        "paper's baselines, whose answers decide the same way: 'base' (all contexts, one call), "
        "'separate' (one call per context), 'random', 'kmeans' (over vectors; groups answered "
        "like corg's), 'retrieve' (the model ranks the contexts for relevance and diversity, "
        "the top retrieve_top answered in one call), 'summarize' (the model summarizes the "
        "contexts, the answer comes from the summary).",
    )
    # NOTE: deviates from the CORG paper (corg.txt §5.2, App. D.2), whose Random and KMeans
    # take CORG's group count for each question: that count is known only once CORG has run,
    # which `quorum eval organize --match-corg` does first; a plain run takes this fixed count.
    groups: int = Field(3, ge=1, description="Group count of the 'random' and 'kmeans' ablations.")
    seed: int = Field(13, description="Seed of the 'random' and 'kmeans' ablations.")
    retrieve_top: int = Field(
        5, ge=1, description="Contexts the 'retrieve' baseline keeps from its ranking (paper: 5)."
    )
    corg_relations: Literal["graph", "none"] = Field(
        "graph",
        description="'graph': CORG relates the contexts (the paper's graph constructor); 'none' "
        "runs it without the relation graph: no pair calls, every pair taken as unrelated (no "
        "duplicate dropped, no counterfactual split), the same dealing and aggregator; a "
        "control, not a method.",
    )
    # NOTE: no paper fixes this: CORG answers each group with one call (its aggregator), the
    # ensemble papers vote over one question's whole top-m. The design card runs the ensemble
    # inside CORG's groups; that composition is quorum's (docs/methods.md, "Organizing").
    corg_answers: Literal["ensemble", "organize"] = Field(
        "ensemble",
        description="Who answers each of CORG's groups: 'ensemble', ensemble.strategy's members "
        "over the group's passages, whose vote decides the group (organize then asks no answer "
        "call); 'organize', one organize call per group, the CORG paper's aggregator as "
        "published (how `eval organize` and the CORG arms of `eval methods` run it, and how its "
        "baselines answer). Either way CORG's aggregator combines the group answers.",
    )


class CoBagSettings(Group):
    """Context Bagging: a relevant core in every view, the rest drawn from a larger pool."""

    members: int = Field(5, ge=1, le=32, description="Bagged views (K) per model (paper: 5).")
    # The paper's defaults (context-bagging.txt §4.1: K = 5, m = 12, r = 6, τ = 1.0, 20
    # paragraphs). Its §4.4 finds accuracy rising with m (EM 0.2615 at m = 8 → 0.2982 at
    # m = 16) on Qwen2.5-7B; no real model measured here says otherwise.
    contexts: int = Field(12, ge=1, description="Contexts per view (m; paper: 12).")
    core: int = Field(
        6, ge=0, description="Top contexts by relevance every view keeps (r; paper: 6 = m/2)."
    )
    shuffle: bool = Field(
        True,
        description="Shuffle each view (step 3). False is the paper's CoBag-NoShuffle ablation "
        "(Table 2): a view keeps the rank order; a control, not a method.",
    )
    sampling: Literal["relevance", "uniform"] = Field(
        "relevance",
        description="How the m - r non-core contexts are drawn: ∝ exp(s/τ) (step 2), or "
        "'uniform', the paper's CoBag-Uniform ablation (Table 2); a control, not a method.",
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
    contexts: int = Field(
        5,
        ge=1,
        description="Passages (N) each permutation shows: the paper's Contriever top-5 (§4.1).",
    )
    vote: Literal["citation", "answer_count"] = Field(
        "citation",
        description="'citation': the citation-consistency score (§3.3); 'answer_count': the "
        "same members' answers counted, the MoA majority vote the paper compares with (its "
        "control, not a method).",
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
    order: Literal["descending", "paired"] = Field(
        "descending",
        description="Answer order: 'descending', the paper's most-useful-first (§3.1); 'paired' "
        "puts the k-th most useful passage at the k-th most read position (the same order when "
        "weights fall with position, as the paper's Figure 6 finds).",
    )
    weights: Literal["fitted", "flat"] = Field(
        "fitted",
        description="'fitted': position weights fitted with the utilities (Eq. 4); 'flat': "
        "every position weighs 1/N, so utilities are plain mean likelihoods: MoI's control "
        "with its position debiasing removed, not a method.",
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
    # K = 5: the CoBag paper runs Self-Consistency and Permute-Vote at its defaults
    # (context-bagging.txt §4.1; K = 3 → 5 gained 2.42 EM, 5 → 7 0.17, §4.4).
    members: int = Field(
        5, ge=1, le=32, description="Views (K) per model for self_consistency and permute_vote."
    )
    # m = 12: the CoBag paper runs Filtered-Single, Self-Consistency and Permute-Vote at its
    # defaults (context-bagging.txt §4.1) and finds accuracy rising with m to 16 (§4.4).
    # NOTE: deviates from the BioASQ ensemble paper (bioasq-llm-ensemble.txt §3.1), which
    # sends the reranked top 300 to Gemini and Claude and finds longer contexts hurt list and
    # factoid answers; 12 abstracts (~3,500 tokens) fit every model quorum names, the demo's
    # 8k window included. CCV shows its own N (ensemble.ccv.contexts), CoBag its own m
    # (ensemble.cobag.contexts).
    contexts: int = Field(
        12,
        ge=1,
        description="Reranked abstracts each view shows (m) for single, self_consistency, "
        "permute_vote and moi, and so what synthesis reads (CoBag paper: 12).",
    )
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


class VerifySettings(Group):
    """The verifier: a model reads the answer beside every passage it cites (one call)."""

    enabled: Literal["auto", "on", "off"] = Field(
        "auto",
        description="'auto': on when the verify model is an OpenAI-compatible endpoint "
        "(provider 'openai'), off for a local model (the 135M demo model cannot judge "
        "entailment; its answers are 'not verified'); 'on' or 'off' whatever the provider.",
    )
    recite: bool = Field(
        True,
        description="When the passages an answer cites do not carry it but other shown "
        "passages on the question do: true re-cites it to those (the trace says so, and its "
        "confidence is earned on the citations it gave), false refuses it. Measured both ways "
        "in docs/measured.md: re-citing kept more correct answers and gives none that nothing "
        "carries.",
    )


class FallbackSettings(Group):
    """Searching elsewhere when the local evidence is insufficient."""

    enabled: bool = Field(
        True,
        description="Query PubMed E-utilities when evidence is insufficient (only once `email` "
        "is set: NCBI asks every client for a contact e-mail).",
    )
    max_rounds: int = Field(1, ge=0, le=3, description="Fallback rounds per question.")
    retmax: int = Field(20, ge=1, le=200, description="Articles fetched per fallback.")
    base_url: str = Field(
        "https://eutils.ncbi.nlm.nih.gov/entrez/eutils", description="E-utilities URL."
    )
    api_key_env: str | None = Field(
        "NCBI_API_KEY", description="Environment variable with an NCBI API key."
    )
    email: str | None = Field(
        None,
        description="Contact e-mail NCBI asks tools to send; without it the fallback asks "
        "nothing (no request leaves the machine).",
    )
    timeout_s: float = Field(10.0, gt=0, description="Request timeout.")
    min_contexts: int = Field(
        1, ge=0, description="Fewer contexts than this is insufficient evidence."
    )
