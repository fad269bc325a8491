"""Records the nodes put into the state, and that traces, exports, chat and the page read back.

TypedDicts are plain dicts at runtime: checkpoints store and restore them unchanged, and a
trace from an older run still loads. Each record says which node writes it. Organize's and the
ensemble's records are in nodes/relations_and_votes.py; a passage, a snippet, a relevance
verdict and the support check's record are typed where infra reads and writes them
(infra/records.py), and importable from here.
"""

# NOTE: no `from __future__ import annotations`: under it, Python 3.11's TypedDict cannot
# see NotRequired and counts every field as required.
from typing import Literal, NotRequired, TypedDict

from infra.records import (
    Carried,
    Check,
    Document,
    Passage,
    PassageRelevance,
    Snippet,
    SupportCheck,
)

__all__ = [
    "ALL_FAILED",
    "JUDGES",
    "Answer",
    "Attempt",
    "Call",
    "Carried",
    "Check",
    "Document",
    "Evidence",
    "Exchange",
    "Fallback",
    "FirstStage",
    "Given",
    "Message",
    "Passage",
    "PassageRelevance",
    "PassageVerdict",
    "Query",
    "Result",
    "Search",
    "Snippet",
    "SupportCheck",
    "SupportRecord",
    "SupportSummary",
    "Verification",
    "call_tokens",
    "model_failed",
    "verified_label",
]


class Exchange(TypedDict):
    """One earlier turn of a chat (graphs/chat), as a follow-up is read against it."""

    question: str
    """The turn's standalone question."""
    answer: str
    """The turn's answer in words."""


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


class PassageVerdict(TypedDict):
    """The verifier's word on one cited passage (nodes/synthesize/verify.py)."""

    pmid: str
    """The cited passage."""
    verdict: Literal["supports", "contradicts", "unrelated"]
    """What the model said; a passage it skipped is "unrelated"."""
    quote: str
    """The sentence of the passage the model said its verdict rests on ("" when none)."""
    quoted: bool
    """Whether the quote is non-empty and stands verbatim in the passage's title or abstract
    (whitespace collapsed)."""
    counts: NotRequired[bool]
    """Whether the verdict counts: its quote is a whole sentence of a passage that addresses
    the question and says what the answer says (verify.quote_problem); otherwise it counts as
    unrelated, and stays here as the model said it. Absent in older records: `quoted` decides."""
    why_not: NotRequired[str]
    """Why the quote counts as nothing (absent when it counts)."""
    flagged: NotRequired[str]
    """The passage addresses the model (infra/injection.py: what it said): it was not shown to
    the verifier and is unrelated, never support."""


class Verification(TypedDict):
    """The verifier's reading of an answer against every passage it cites, in one call."""

    status: Literal["supported", "refused", "not verified"]
    """"supported": a quoted passage supports the answer (and, for yes/no, none contradicts
    it); "refused": the evidence does not carry it, or the reply did not parse; "not
    verified": the verifier was off or its call failed (the model-free check stands)."""
    passages: list[PassageVerdict]
    """One verdict per cited passage, in the order cited."""
    why: str
    """What decided the status, in words (the passages and quotes, or the error)."""
    judge: NotRequired[Literal["independent", "self"]]
    """Who was asked, whenever a verifier was: "independent", a model other than the one(s)
    that wrote the answer; "self", one of them (the only model configured), so a "supported"
    is self-verified. Absent when no verifier was asked (verify.enabled off)."""


JUDGES = {
    "independent": "a model other than the one that answered",
    "self": "the model that wrote the answer",
}
"""What a verification's `judge` says, in words."""


def verified_label(verification: Verification) -> str:
    """Return the verifier's word as a reader gets it: a self-judged support is self-verified."""
    status = verification.get("status", "not verified")
    if status == "supported" and verification.get("judge") == "self":
        return "self-verified"
    return status


class SupportRecord(SupportCheck):
    """The support check's verdict on one answer, with what the nodes add to infra's record."""

    verified: NotRequired[Verification]
    """The verifier's reading (nodes/synthesize/verify.py): "not verified" when it is off or its
    call failed, so an unverified answer says so."""
    relevance: NotRequired[dict[str, PassageRelevance]]
    """The relevance verdict of each passage the answer cites (and of any it was re-cited to)."""
    recited: NotRequired[dict[str, list[str]]]
    """When the passages an answer cited did not carry it and shown passages on the question
    do (verify.recite): "from", the PMIDs it cited; "to", those it now cites."""


class SupportSummary(TypedDict):
    """What the support check said of the answer given, as a result carries it (finalize)."""

    verdict: Literal["supported", "refused"]
    """The support record's verdict; "refused" whenever no answer is given."""
    verified: str
    """The verifier's word as a reader gets it (`verified_label`): supported, self-verified,
    refused or not verified."""
    why: str
    """What decided it: the verifier's why, else the support check's reason ("" when none)."""
    judge: NotRequired[Literal["independent", "self"]]
    """Who verified, when a verifier was asked (Verification.judge)."""


class Answer(TypedDict):
    """The current answer: synthesize's, or the vote standing in when synthesis failed."""

    exact: list[str]
    """The exact answers, BioASQ-formatted, best first."""
    ideal: str
    """The ideal (paragraph) answer; "" when the vote stands in."""
    confidence: float
    """The confidence the evidence earns (nodes/synthesize/confidence.py): the model's word
    capped by members answering, their agreement and the citations backing the answer."""
    cited: list[str]
    """PMIDs the answer cites (shown contexts only)."""
    source: NotRequired[Literal["synthesis", "vote", "decision", "insufficient"]]
    """Who answered: the synthesis model; "vote": the decision by the rule step, standing in
    when every synthesis attempt of the round failed; "decision": the strategy's decision,
    final in synthesis.mode "vote"; "insufficient": nothing that keeps the answer contract."""
    model_confidence: NotRequired[float | None]
    """The synthesizer's own confidence (0 for an attempt that failed or broke the contract):
    what the paper's gate reads; None when no model answered."""
    confidence_parts: NotRequired[dict[str, float | str | bool | None]]
    """What the confidence was earned from: model, answered, agreement, on_question, citations,
    supported, evidence; who judged it (judge), whether it was capped, whether re-cited."""
    failed: NotRequired[str]
    """Why this attempt is not an answer (the call failed, or the answer broke the contract)."""
    insufficient: NotRequired[str]
    """Why the evidence is insufficient: the answer is the insufficient-evidence statement."""
    overrode_decision: NotRequired[bool]
    """synthesis (mode "llm"): whether its first exact answer differs from the decision's."""
    extracted: NotRequired[list[str]]
    """synthesis: the exact answers as the model wrote them, before formatting."""
    rationale: NotRequired[str]
    """synthesis: which evidence decided the answer."""
    support: NotRequired[SupportRecord]
    """What the support check found (nodes/synthesize/support.py): its verdict, the items
    kept and dropped, where each is carried, every check."""


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
    endpoint: NotRequired[str]
    """Where the call went: the endpoint's URL (no credentials), or "local model"."""


def call_tokens(call: Call) -> int:
    """Return a call's input plus output tokens (0 where a trace lacks them)."""
    return int(call.get("input_tokens") or 0) + int(call.get("output_tokens") or 0)


class Evidence(TypedDict):
    """One cited passage and the sentence of it that supports the answer."""

    pmid: str
    """The cited document."""
    title: str
    """Its title."""
    sentence: str
    """Its sentence that best supports the answer ("" when none could be chosen)."""
    section: str
    """Where the sentence is: "title" or "abstract"."""
    offset: int
    """The sentence's first character in that section."""
    relevance: NotRequired[PassageRelevance]
    """Whether the passage addresses the question (infra/relevance.py)."""


class Result(TypedDict):
    """The final BioASQ-shaped answer finalize writes."""

    insufficient: bool
    """Whether a question that was to be answered has no answer."""
    insufficient_reason: str | None
    """Why it has none (the evidence carried no answer, or, when `failed`, which model at
    which endpoint returned what)."""
    failed: NotRequired[bool]
    """Whether no ensemble member and no synthesis call gave a parseable reply: a model
    failure (the run failed), not thin evidence; read through `model_failed` (below)."""
    question: str
    """The question answered (a follow-up as rewritten)."""
    type: str
    """The BioASQ question type."""
    exact_answer: str | list[list[str]] | None
    """yesno: "yes"/"no"; factoid, list: lists of synonyms; summary, and any insufficient
    result: None (nothing is guessed)."""
    ideal_answer: str
    """The ideal answer."""
    confidence: float
    """The confidence the evidence earns (the model's word capped by the evidence)."""
    model_confidence: float | None
    """The synthesizer's own confidence; None when no model gave one."""
    confidence_parts: dict[str, float | str | bool | None]
    """What the confidence was earned from (nodes/synthesize/confidence.py)."""
    evidence: list[Evidence]
    """Cited evidence: the passages the answer rests on, each with its supporting sentence."""
    documents: list[str]
    """Retrieved documents: PMIDs in retrieval (rerank) order, never re-ordered by what the
    answer cites (at most 10; what BioASQ phase A scores)."""
    snippets: list[Snippet]
    """The sentences of those documents closest to the question."""
    titles: dict[str, str]
    """Title per document PMID."""
    support: NotRequired[SupportSummary | None]
    """The support check on the answer: verdict (supported/refused), verified (supported,
    self-verified, refused or not verified), judge (independent or self, when a verifier was
    asked) and why; None when nothing was to be answered."""
    relevance: NotRequired[dict[str, PassageRelevance]]
    """Whether each retrieved document listed, and each cited passage, addresses the question
    (infra/relevance.py), by PMID: those judged."""
    thread_id: NotRequired[str]
    """The run's thread, added by whoever ran it (graphs/runtime.Outcome, ask, chat); never
    in the state."""


ALL_FAILED = "no model could answer this question from the evidence found"
"""How the reason of a model failure begins (finalize writes it, `model_failed` reads it)."""


def model_failed(result: Result) -> bool:
    """Return whether a run's result is a model failure (finalize's `failed`), not an answer."""
    if "failed" in result:
        return bool(result["failed"])
    # A result from before `failed` was kept: its reason was the only mark.
    reason = str(result.get("insufficient_reason") or "")
    return bool(result.get("insufficient")) and reason.startswith(ALL_FAILED)
