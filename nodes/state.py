"""The state every node reads and the updates it returns: the contract of the QA graph.

The records inside it (members, votes, answer, calls, …) are typed in nodes/records.py and
nodes/relations_and_votes.py, and importable from here.
"""

# NOTE: no `from __future__ import annotations` (TypedDict must see NotRequired; see records).
import operator
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from infra.bioasq.types import QuestionType
from nodes.records import (
    Answer,
    Attempt,
    Call,
    Carried,
    Check,
    Document,
    Evidence,
    Exchange,
    Fallback,
    FirstStage,
    Given,
    Message,
    Passage,
    PassageRelevance,
    Query,
    Result,
    Search,
    Snippet,
    SupportRecord,
    SupportSummary,
    call_tokens,
)
from nodes.relations_and_votes import (
    CcvRow,
    CcvVote,
    DecidedAnswer,
    Decision,
    Group,
    GroupVote,
    Member,
    MoiFit,
    Organized,
    Relation,
    RelationEdge,
    RelationGraph,
    Triple,
    VoteRow,
    Votes,
)

__all__ = [
    "RESET",
    "Answer",
    "Attempt",
    "Call",
    "Carried",
    "CcvRow",
    "CcvVote",
    "Check",
    "DecidedAnswer",
    "Decision",
    "Document",
    "Evidence",
    "Exchange",
    "Fallback",
    "FirstStage",
    "Given",
    "Group",
    "GroupVote",
    "InputState",
    "Limits",
    "Member",
    "Message",
    "MoiFit",
    "Organized",
    "OutputState",
    "Passage",
    "PassageRelevance",
    "QAState",
    "Query",
    "Relation",
    "RelationEdge",
    "RelationGraph",
    "Result",
    "Search",
    "Snippet",
    "SupportRecord",
    "SupportSummary",
    "Triple",
    "VoteRow",
    "Votes",
    "call_tokens",
    "merge_by_pmid",
]

RESET: dict[str, Any] = {"__reset__": True}
"""Sentinel a node returns for `pool` to empty it."""


def merge_by_pmid(left: dict[str, dict] | None, right: dict[str, dict] | None) -> dict[str, dict]:
    """Merge documents keyed by PMID (newer wins); RESET empties the pool."""
    if right is RESET or (right and right.get("__reset__")):
        return {}
    return {**(left or {}), **(right or {})}


class Limits(TypedDict):
    """The bounds routers decide by, copied from settings so every decision is explainable."""

    min_hits: int
    max_refinements: int
    min_confidence: float
    max_attempts: int
    max_fallbacks: int
    min_contexts: int


class InputState(TypedDict):
    """What a caller gives: a question and, optionally, its BioASQ type."""

    question: str
    qtype: NotRequired[QuestionType | None]
    given: NotRequired[Given | None]
    """BioASQ phase B: the organizers' documents (PMIDs) and snippets to answer from."""
    history: NotRequired[list[Exchange] | None]
    """Chat: earlier turns (question, answer) a follow-up is rewritten against."""


class QAState(InputState, total=False):
    """Everything the nodes share while answering one question."""

    asked: str
    """The user's own words when a follow-up was rewritten into `question`."""
    qtype_source: Literal["given", "detected"]
    """Whether the type came from the caller or was detected from the question's form."""
    limits: Limits
    """Router bounds for this run."""
    query: str
    """The boolean query the next search runs."""
    queries: Annotated[list[Query], operator.add]
    """Every query proposed: text, source (model, repair, keywords, refine), validation error."""
    searches: Annotated[list[Search], operator.add]
    """Every search run: query, total hits, candidates returned, milliseconds."""
    hits: int
    """Total matches of the last search."""
    refinements: int
    """Refinement rounds so far."""
    candidates: list[tuple[str, float]]
    """BM25 candidates of the last search as (PMID, score), best first."""
    pool: Annotated[dict[str, Document], merge_by_pmid]
    """Documents found outside the index (fallback search), keyed by PMID, with their text."""
    first_stage: FirstStage
    """How many of rerank's candidates BM25 found, the dense stage found, both, the pool gave."""
    ranked: list[tuple[str, float]]
    """Reranked candidates as (PMID, fused score), best first, at most rerank.top_k."""
    contexts: list[Passage]
    """The top reranked documents with text: pmid, title, abstract, score."""
    relevance: Annotated[dict[str, PassageRelevance], merge_by_pmid]
    """Whether each passage addresses the question, by PMID (infra/relevance.py): rerank
    judges its contexts, synthesize any passage it reads that was not judged (phase B's)."""
    relations: list[Relation]
    """Relations found between contexts: a, b (PMIDs), label, and whether it was applied."""
    organized: list[Passage]
    """Contexts kept by organize, in rank order."""
    relation_graph: RelationGraph
    """CORG: pairs asked vs mirrored, labels, calls vs the naive count."""
    triples: dict[str, Triple]
    """CORG: (answer, entity, descriptor) extracted per PMID."""
    groups: list[Group]
    """CORG: groups of contexts with the question form asked and their cited answer (organize
    writes them; the ensemble fills in the answers of those it answers)."""
    members: list[Member]
    """Ensemble members: model, view (PMID order), answer, cited PMIDs, raw output, cost."""
    votes: Votes
    """The ensemble's vote table and ranked candidate answers (for the trace)."""
    decision: Decision
    """What the strategy decided: ranked answers with support, its evidence order, settings."""
    attempts: Annotated[list[Attempt], operator.add]
    """Synthesis attempts: round, temperature, output or error."""
    answer: Answer
    """The current answer: exact, ideal, confidence, cited PMIDs."""
    fallbacks: Annotated[list[Fallback], operator.add]
    """Fallback searches: query, status, documents added."""
    calls: Annotated[list[Call], operator.add]
    """Every model call: node, model, latency, tokens, raw output."""
    notes: Annotated[list[str], operator.add]
    """Things a reader of the trace should know (fallbacks taken, outputs repaired)."""
    result: Result
    """The final BioASQ-shaped answer."""


class OutputState(TypedDict, total=False):
    """What a caller gets back."""

    result: Result


def evidence_round(state: QAState) -> int:
    """Return the evidence round: 0 before any fallback search, +1 after each."""
    return len(state.get("fallbacks", []))
