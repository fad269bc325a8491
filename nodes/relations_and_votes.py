"""Records of the answering methods: organize's relations and groups, the ensemble's votes.

Plain TypedDicts, as in nodes/records.py (which holds the evidence, answer and call records);
both are importable from nodes/state.py.
"""

# NOTE: no `from __future__ import annotations`: under it, Python 3.11's TypedDict cannot
# see NotRequired and counts every field as required.
from typing import Any, Literal, NotRequired, TypedDict

from nodes.records import Call, Passage


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
    (duplicates, ambiguous twins)."""
    supported_by: NotRequired[list[str]]
    """CORG: PMIDs that carry the group's answer: those it cites and those dropped in their
    favour, or its counterfactual side when it cites none; never the filler the reranker dealt
    in. The aggregator weighs the answer by them."""
    shown: NotRequired[str]
    """summarize: what the answering call was shown instead of the passages (the summary)."""
    answered_by: NotRequired[Literal["organize", "ensemble"]]
    """Who answers it: one organize call (CORG's aggregator, its baselines; so when absent) or
    ensemble.strategy's members, whose vote fills answer, exact and cited
    (organize.corg_answers "ensemble")."""
    twins: NotRequired[dict[str, list[str]]]
    """CORG: per PMID of the group, the PMIDs organize dropped in its favour."""
    rivals: NotRequired[list[str]]
    """CORG: the group's PMIDs that contradict a context kept in another group (its side)."""
    share: NotRequired[float]
    """Answered by the ensemble: the strategy's share of the group's members (CCV: of its valid
    citations) behind the group's answer; the aggregate's share counts it."""


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
    group: NotRequired[int]
    """The CORG group this call answered, numbered from 1 as organize's trace numbers them
    (absent: the ensemble answered the question's top-m, no groups)."""
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
    groups: list["GroupVote"]
    """The strategy's vote inside each CORG group it answered, in organize's group order."""


class GroupVote(TypedDict):
    """The ensemble strategy inside one CORG group: what it was asked, its vote, its decision."""

    group: int
    """The group's number, from 1, as organize's trace numbers them."""
    pmids: list[str]
    """The group's contexts: all a view of it may show."""
    question: str
    """The form of the question its members were asked (plural for a group of several)."""
    votes: Votes
    """The strategy's vote table over the group's members."""
    decision: "Decision"
    """The strategy's decision for the group, which becomes the group's answer."""


class DecidedAnswer(TypedDict):
    """One answer of a decision, with what supports it."""

    answer: str | list[str]
    """The answer as members (or groups) wrote it; a list question's items as a list."""
    support: float
    """What ranked it: votes (majority, CoBag, MoI), the citation score (CCV), the share of
    the contexts carrying it (CORG's aggregator); the decision's `why` names the measure."""
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
    """Who answered: the ensemble's members (over the top-m, or inside each CORG group, whose
    decisions CORG's aggregator combines), or organize's own group answers."""
    share: NotRequired[float]
    """The first answer's share of the support (members, valid citations), in [0, 1]; what
    synthesis.mode "vote" reports as the confidence (absent: first support over their sum)."""
    plural: NotRequired[bool]
    """organize: the groups gave different answers; every answer stands with its references
    (CORG's aggregator) and a yes/no conflict decides neither side (share 0)."""
    conflict: NotRequired[list[str]]
    """organize: the groups' distinct first answers, when they differ."""


class Organized(TypedDict):
    """What an organize strategy returns, and the organize node writes into the state."""

    organized: list[Passage]
    """The contexts kept, in rank order (retrieve: in the model's order)."""
    relations: list[Relation]
    """The relations found between the contexts ([] for a strategy that finds none)."""
    calls: NotRequired[list[Call]]
    """The strategy's model calls."""
    notes: NotRequired[list[str]]
    """What a reader of the trace should know (contexts dropped, calls made)."""
    groups: NotRequired[list[Group]]
    """A strategy that answers groups: each group with its answer."""
    relation_graph: NotRequired[RelationGraph]
    """CORG: the relation graph."""
    triples: NotRequired[dict[str, Triple]]
    """CORG: what each context says, by PMID."""
    decision: NotRequired[Decision]
    """The node: the aggregate of the group answers, when a group answered."""
