"""Records the nodes put into the state, and that traces, exports, chat and the page read back.

TypedDicts are plain dicts at runtime: checkpoints store and restore them unchanged, and a
trace from an older run still loads. Each record says which node writes it.
"""

# NOTE: no `from __future__ import annotations`: under it, Python 3.11's TypedDict cannot
# see NotRequired and counts every field as required.
from typing import Any, Literal, NotRequired, TypedDict


class Exchange(TypedDict):
    """One earlier turn of a chat (graphs/chat), as a follow-up is read against it."""

    question: str
    """The turn's standalone question."""
    answer: str
    """The turn's answer in words."""


class Snippet(TypedDict):
    """A BioASQ snippet: given with a phase B question, or picked by finalize."""

    document: str
    """The PubMed URL of the snippet's document."""
    text: str
    """The snippet's text, exactly as it stands in the section."""
    offsetInBeginSection: int
    """Character offset of the text's start in beginSection."""
    offsetInEndSection: int
    """Character offset of the text's end in endSection."""
    beginSection: str
    """Section the text starts in: title or abstract."""
    endSection: str
    """Section the text ends in: title or abstract."""
    score: NotRequired[float]
    """finalize: cosine of the sentence to the question."""


class Given(TypedDict, total=False):
    """BioASQ phase B: the evidence the organizers give with a question."""

    documents: list[str]
    """The gold documents (PubMed URLs), in list order."""
    snippets: list[Snippet]
    """The gold snippets, the only text phase B answers from."""


class Query(TypedDict):
    """A query proposed by generate_query or refine_query."""

    query: str | None
    """The boolean query (None when the model gave none)."""
    source: Literal["model", "repair", "keywords", "refine", "question"]
    """Who wrote it: the query model, its repair, the question's keywords (a fallback), the
    refine model, or the question itself (search.query_mode 'question': no model)."""
    error: str | None
    """Why it was not usable (None when it validated)."""


class FirstStage(TypedDict):
    """Where rerank's candidates came from (search.dense_candidates adds the dense stage)."""

    bm25: int
    """Candidates of the last BM25 search."""
    dense: int
    """Documents nearest the question by vector (0 when the dense stage is off)."""
    both: int
    """Documents both stages found."""
    dense_only: int
    """Documents only the dense stage found: added to BM25's candidates with BM25 score 0."""
    pool: int
    """Documents from the fallback pool (found outside the index)."""


class Search(TypedDict):
    """A search run by search."""

    query: str
    """The query run."""
    hits: int
    """Total matches (0 when the backend refused the query)."""
    returned: NotRequired[int]
    """Candidates returned, at most search.max_candidates."""
    ms: NotRequired[float]
    """Wall time of the search in milliseconds."""
    backend: NotRequired[str]
    """The search backend's name."""
    error: NotRequired[str]
    """Why the backend refused the query."""


class Document(TypedDict, total=False):
    """An article fallback_search found in PubMed, kept in the pool by PMID."""

    pmid: str
    """The article's PMID."""
    title: str
    """The article's title."""
    abstract: str
    """The article's abstract."""
    year: int | None
    """Publication year, when one could be read."""
    mesh: list[str]
    """MeSH descriptor names."""
    journal: str
    """The journal's name or abbreviation."""


class Passage(TypedDict):
    """A document the answering nodes read: written by rerank or given_evidence."""

    pmid: str
    """The document's PMID."""
    title: str
    """Its title ("" for phase B's given snippets)."""
    abstract: str
    """Its abstract (phase B: its given snippets, joined)."""
    year: NotRequired[int | None]
    """rerank: the publication year, when known."""
    score: float
    """rerank: the fused (or cross-encoder) score; given_evidence: list position, 1 first."""


class Fallback(TypedDict):
    """A fallback search of PubMed by fallback_search."""

    source: str
    """Where it searched: "pubmed-eutils"."""
    query: str
    """The PubMed term searched."""
    added: int
    """Documents added to the pool (new, with an abstract, not already indexed)."""
    status: str
    """ "ok", or why it found nothing ("fallback unavailable: …", "fallback failed: …")."""
    returned: NotRequired[int]
    """Articles PubMed returned."""


class Relation(TypedDict):
    """A relation organize found between two contexts."""

    a: str
    """PMID of the earlier context."""
    b: str
    """PMID of the later context."""
    label: str
    """duplicated, counterfactual, distracting, ambiguous or none."""
    cosine: NotRequired[float]
    """dedupe: cosine of the two contexts, which must confirm a claimed duplicate."""
    applied: NotRequired[bool]
    """dedupe: whether the later context was dropped."""
    source: NotRequired[Literal["asked", "mirrored", "failed"]]
    """CORG: how the label was obtained."""
    mirrored: NotRequired[bool]
    """CORG: whether the label was inferred rather than asked."""


class RelationEdge(TypedDict):
    """CORG: one labelled pair of the relation graph."""

    pair: list[int]
    """The two contexts' indices (rank order), smaller first."""
    label: str
    """duplicated, counterfactual, distracting, ambiguous or none."""
    source: Literal["asked", "mirrored", "failed"]
    """Whether a model was asked, the label was inferred through an anchor, or the call failed."""
    mirrored: bool
    """Whether the label was inferred (source "mirrored")."""
    via: int | None
    """The anchor a mirrored label was inferred through."""
    error: NotRequired[str]
    """Why the relate call failed."""


class RelationGraph(TypedDict):
    """CORG: the relation graph organize built, as traces show it."""

    n: int
    """Contexts related."""
    calls: int
    """Relation calls made."""
    naive_calls: int
    """Calls relating every pair would take."""
    rounds: list[int]
    """The anchor context of each round, by index."""
    edges: list[RelationEdge]
    """Every labelled pair."""
    pmids: list[str]
    """The contexts' PMIDs, by index."""


class Triple(TypedDict):
    """CORG: what one context says in answer to the question."""

    answer: str
    """The context's answer, in a few words."""
    entity: str
    """The entity asked about, as the context names it."""
    descriptor: str
    """What sets the context's reading apart ("" when nothing does)."""


class Group(TypedDict):
    """CORG (and its grouping baselines): a group of contexts and its cited answer."""

    pmids: list[str]
    """The group's contexts, in rank order."""
    question: str
    """The form of the question asked (plural for a group of several)."""
    answer: str
    """The group's answer in words, each part with what it applies to ("" when the call failed)."""
    cited: list[str]
    """PMIDs of the group the answer cites."""
    error: str | None
    """Why the call failed."""
    exact: NotRequired[list[str]]
    """The group's short answers, best first (yesno: one of yes/no; summary: none)."""
    covers: NotRequired[list[str]]
    """PMIDs the group stands for: its own and those organize dropped in their favour
    (duplicates, ambiguous twins); the aggregator weighs the group's answers by them."""
    shown: NotRequired[str]
    """summarize: what the answering call was shown instead of the passages (the summary)."""


class Member(TypedDict):
    """One ensemble call: a model answering one view of the contexts."""

    model: str
    """The model's name."""
    view: int
    """The view's number (its order among the strategy's views)."""
    order: list[str]
    """PMIDs of the passages shown, in the order shown."""
    temperature: float
    """Sampling temperature of the call."""
    answer: list[str]
    """The member's answers, best first ([] when the call failed)."""
    pmids: list[str]
    """PMIDs the member cites (shown passages only)."""
    raw: str
    """The model's raw output."""
    error: str | None
    """Why the call failed; a failed member does not vote."""
    latency_s: float
    """Seconds the call took."""
    tokens: int
    """Input plus output tokens."""
    passage: NotRequired[int]
    """ccv: the number of the one passage cited."""
    quote: NotRequired[str]
    """ccv: the member's quote from that passage."""


class VoteRow(TypedDict):
    """One candidate answer of the vote table."""

    answer: str
    """The answer as members wrote it most often."""
    votes: int
    """Members naming it."""
    normalized: str
    """The normalized key members' answers were counted by."""
    variants: NotRequired[list[str]]
    """The spellings that were counted together, when more than one."""


class CcvRow(TypedDict):
    """ccv: one answer, scored by the citations that support it."""

    answer: str
    """The normalized answer."""
    score: int
    """Valid citations of its most cited passage."""
    frequency: int
    """Members giving it."""
    pmid: str | None
    """Its most cited passage."""


class CcvVote(TypedDict):
    """ccv: the citation-consistent vote."""

    winner: str | None
    """The normalized answer chosen."""
    table: list[CcvRow]
    """Answers by score, then frequency."""
    valid: list[bool]
    """Per member that answered: whether its citation holds up."""
    citation_agreement: float
    """Share of valid citations that cite the winner's passage."""
    evidence: Literal["strict", "relaxed"]
    """How strictly a quote must match its passage."""


class MoiFit(TypedDict):
    """moi: one model's likelihoods under several orders, and the position bias fitted."""

    observations: list[float]
    """Log-likelihood of the question per order."""
    permutations: list[list[str]]
    """The orders observed, as PMIDs."""
    position_weights: list[float]
    """Fitted weight per position."""
    utilities: dict[str, float]
    """Debiased utility per PMID."""
    order: list[str]
    """The debiased order the member then answers from."""
    residual: float
    """Squared error of the fit."""
    orientation: NotRequired[str]
    """What turned the fit's mirror (full orders cannot): the retriever prior, prefix orders,
    or the paper's primacy finding."""


class Votes(TypedDict, total=False):
    """The ensemble's vote over its members' answers."""

    ranked: list[str]
    """The answers voted in, best first."""
    table: list[VoteRow]
    """Every candidate with its votes, most first."""
    agreement: float
    """Share of answering members naming the top candidate."""
    distinct: int
    """Distinct candidates."""
    members: int
    """Members that answered."""
    strategy: str
    """The ensemble strategy (settings ensemble.strategy)."""
    failed: int
    """Members whose call failed."""
    relevance: dict[str, float]
    """cobag: cosine of the question to each context, by PMID."""
    ccv: CcvVote | str
    """ccv: the citation vote, or why the question type was voted by majority instead."""
    citation_agreement: float
    """ccv: share of valid citations that cite the winner's passage."""
    moi: dict[str, MoiFit]
    """moi: the fit per "number:model"."""


class DecidedAnswer(TypedDict):
    """One answer of a decision, with what supports it."""

    answer: str | list[str]
    """The answer as members (or groups) wrote it; a list question's items as a list."""
    support: float
    """What ranked it: votes (majority, CoBag, MoI), the citation score (CCV), the group
    weight (CORG's aggregator); the decision's `why` names the measure."""
    cited: list[str]
    """PMIDs its supporters cited (CCV: its modal passage first)."""


class Decision(TypedDict):
    """What a strategy decided: its ranked answers and the evidence order it chose.

    The ensemble node writes it (or passes organize's aggregate on); synthesize reads it, never
    the vote table: in synthesis.mode "vote" its first answer is final, in "llm" the synthesizer
    is told it and shown the passages in `order`.
    """

    strategy: str
    """The strategy that decided (ensemble.strategy, or organize.strategy for "organize")."""
    answers: list[DecidedAnswer]
    """Ranked answers, best first ([] when nothing answered)."""
    order: list[str]
    """PMIDs in the evidence order the strategy chose (MoI: debiased; CoBag: most relevant
    first; CCV: the winner's passage first; otherwise the rank order)."""
    why: str
    """One line: why the first answer won."""
    settings: dict[str, Any]
    """Every setting of the strategy that ran (K, m, pool, r, tau, seed, evidence, scheme…)."""
    source: Literal["ensemble", "organize"]
    """Who decided: the ensemble's members, or organize's group answers (CORG)."""
    share: NotRequired[float]
    """The first answer's share of the support (members, valid citations), in [0, 1]; what
    synthesis.mode "vote" reports as the confidence (absent: first support over their sum)."""


class Answer(TypedDict):
    """The current answer: synthesize's, or the vote standing in when synthesis failed."""

    exact: list[str]
    """The exact answers, BioASQ-formatted, best first."""
    ideal: str
    """The ideal (paragraph) answer; "" when the vote stands in."""
    confidence: float
    """Probability the answer is correct (0 when the vote stands in)."""
    cited: list[str]
    """PMIDs the answer cites (shown contexts only)."""
    source: NotRequired[Literal["synthesis", "vote", "decision"]]
    """Who answered: the synthesis model; the vote when it failed; "decision": the strategy's
    decision, final in synthesis.mode "vote"."""
    overrode_decision: NotRequired[bool]
    """synthesis (mode "llm"): whether its first exact answer differs from the decision's."""
    extracted: NotRequired[list[str]]
    """synthesis: the exact answers as the model wrote them, before formatting."""
    rationale: NotRequired[str]
    """synthesis: which evidence decided the answer."""


class Attempt(TypedDict):
    """One synthesis attempt."""

    round: int
    """The evidence round: 0 before any fallback search, +1 after each."""
    temperature: float
    """Sampling temperature (0 for a repeat in the same round)."""
    answer: Answer
    """The attempt's answer."""
    error: str | None
    """Why the synthesis call failed."""


class Message(TypedDict):
    """One prompt message sent to a model."""

    role: str
    """system, user or assistant."""
    content: str
    """The message's text."""


class Call(TypedDict):
    """One model call, as infra.structured.Reply.record writes it (and moi's likelihood calls)."""

    node: str
    """The node that made the call."""
    model: str
    """The model's name."""
    started: float
    """Wall-clock time (epoch seconds) the call left quorum."""
    latency_s: float
    """Seconds the call took."""
    input_tokens: int
    """Prompt tokens."""
    output_tokens: int
    """Completion tokens."""
    raw: str
    """The model's raw output."""
    error: str | None
    """Why the call failed."""
    prompt: NotRequired[list[Message]]
    """The messages sent."""
    temperature: NotRequired[float | None]
    """Sampling temperature (None: the model's default)."""
    kind: NotRequired[Literal["loglikelihood"]]
    """moi: a likelihood call rather than a chat completion."""
    method: NotRequired[str]
    """The structured-output method, when the endpoint refused the configured one and why."""


def call_tokens(call: Call) -> int:
    """Return a call's input plus output tokens (0 where a trace lacks them)."""
    return int(call.get("input_tokens") or 0) + int(call.get("output_tokens") or 0)


class Result(TypedDict):
    """The final BioASQ-shaped answer finalize writes."""

    insufficient: bool
    """Whether a question that was to be answered has no answer."""
    insufficient_reason: str | None
    """Why it has none (every member failed, or the model gave no answer)."""
    question: str
    """The question answered (a follow-up as rewritten)."""
    type: str
    """The BioASQ question type."""
    exact_answer: str | list[list[str]] | None
    """yesno: "yes"/"no"; factoid, list: lists of synonyms; summary: None."""
    ideal_answer: str
    """The ideal answer."""
    confidence: float
    """The answer's confidence."""
    documents: list[str]
    """PMIDs, cited first, then by rank (at most 10)."""
    snippets: list[Snippet]
    """The sentences of those documents closest to the question."""
    titles: dict[str, str]
    """Title per document PMID."""
