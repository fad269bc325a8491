"""The state every node reads and the updates it returns: the contract of the QA graph."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from infra.bioasq.types import QuestionType

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
    given: NotRequired[dict[str, Any] | None]
    """BioASQ phase B: the organizers' documents (PMIDs) and snippets to answer from."""
    history: NotRequired[list[dict[str, Any]] | None]
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
    queries: Annotated[list[dict[str, Any]], operator.add]
    """Every query proposed: text, source (model, repair, keywords, refine), validation error."""
    searches: Annotated[list[dict[str, Any]], operator.add]
    """Every search run: query, total hits, candidates returned, milliseconds."""
    hits: int
    """Total matches of the last search."""
    refinements: int
    """Refinement rounds so far."""
    candidates: list[tuple[str, float]]
    """BM25 candidates of the last search as (PMID, score), best first."""
    pool: Annotated[dict[str, dict[str, Any]], merge_by_pmid]
    """Documents found outside the index (fallback search), keyed by PMID, with their text."""
    ranked: list[tuple[str, float]]
    """Reranked candidates as (PMID, fused score), best first, at most rerank.top_k."""
    contexts: list[dict[str, Any]]
    """The top reranked documents with text: pmid, title, abstract, score."""
    relations: list[dict[str, Any]]
    """Relations found between contexts: a, b (PMIDs), label, and whether it was applied."""
    organized: list[dict[str, Any]]
    """Contexts kept by organize, in rank order."""
    relation_graph: dict[str, Any]
    """CORG: pairs asked vs mirrored, labels, calls vs the naive count."""
    triples: dict[str, dict[str, str]]
    """CORG: (answer, entity, descriptor) extracted per PMID."""
    groups: list[dict[str, Any]]
    """CORG: groups of contexts with the question form asked and their cited answer."""
    members: list[dict[str, Any]]
    """Ensemble members: model, view (PMID order), answer, cited PMIDs, raw output, cost."""
    votes: dict[str, Any]
    """The ensemble's vote table and ranked candidate answers."""
    attempts: Annotated[list[dict[str, Any]], operator.add]
    """Synthesis attempts: round, temperature, output or error."""
    answer: dict[str, Any]
    """The current answer: exact, ideal, confidence, cited PMIDs."""
    fallbacks: Annotated[list[dict[str, Any]], operator.add]
    """Fallback searches: query, status, documents added."""
    calls: Annotated[list[dict[str, Any]], operator.add]
    """Every model call: node, model, latency, tokens, raw output."""
    notes: Annotated[list[str], operator.add]
    """Things a reader of the trace should know (fallbacks taken, outputs repaired)."""
    result: dict[str, Any]
    """The final BioASQ-shaped answer."""


class OutputState(TypedDict, total=False):
    """What a caller gets back."""

    result: dict[str, Any]
