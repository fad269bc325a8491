"""What a node's update shows in a trace, as blocks that the text and the HTML views both render.

A node that has more to show than its raw update (the queries proposed and refused, the hits and
their BM25 scores, the reranked documents and which became contexts, organize's relation graph
and groups, the ensemble's members and votes, synthesize's attempts, the fallback's rounds)
registers a `trace` function with its
description (`nodes.describing.NodeDescription`). That function returns these blocks, and
nothing else decides what a trace shows: `graphs.describe.trace_lines` prints them for
`quorum trace show`, chat's /trace and the page; `graphs.traces.export` turns the same blocks
into HTML (tables, the relation graph as a picture). A run's answer (`AnswerBlock`) and each model
call (`ModelCall`) are blocks too, so ask, chat and `trace show` print the same description the
HTML export draws.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from nodes.state import Decision, RelationEdge
from nodes.state import RelationGraph as GraphRecord


@dataclass(frozen=True)
class Facts:
    """One line of facts about the update ("strategy ccv: 5 member calls, agreement 0.60")."""

    text: str


@dataclass(frozen=True)
class Lines:
    """Lines shown as they are (text) or preformatted (HTML), indentation kept."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A titled table; `numeric` columns align right."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True)
class RelationGraph:
    """CORG's relation graph: numbered contexts, each edge with its label and how it was known.

    How: asked, mirrored via an anchor, or failed. HTML draws it; text lists the edges.
    """

    n: int
    pmids: tuple[str, ...]
    anchors: tuple[int, ...]
    calls: Any
    naive_calls: Any
    edges: tuple[RelationEdge, ...]

    def name(self, i: Any) -> str:
        """Return "[2] 102" for context index 1 ("-" when there is none)."""
        if not isinstance(i, int):
            return "-"
        return f"[{i + 1}] {self.pmids[i]}" if i < len(self.pmids) else f"[{i + 1}]"

    def summary(self) -> str:
        """Return "4 contexts, 4 relation calls for 6 pairs; anchors [1] 101"."""
        anchors = ", ".join(self.name(i) for i in self.anchors) or "-"
        return (
            f"{self.n} contexts, {self.calls} relation calls for {self.naive_calls} pairs; "
            f"anchors {anchors}"
        )

    def how(self, edge: RelationEdge) -> str:
        """Return how an edge's label was known: "mirrored via [1] 101", "failed (timeout)"."""
        how = str(edge.get("source") or "")
        if edge.get("via") is not None:
            how += f" via {self.name(edge['via'])}"
        if edge.get("error"):
            how += f" ({edge['error']})"
        return how

    @classmethod
    def of(cls, graph: GraphRecord) -> RelationGraph:
        """Read a recorded `relation_graph`; `n` covers every context an edge names."""
        edges = tuple(e for e in graph.get("edges") or [] if isinstance(e, dict))
        n = max([int(graph.get("n") or 0), *(i + 1 for e in edges for i in e["pair"])])
        return cls(
            n=n,
            pmids=tuple(str(p) for p in graph.get("pmids") or []),
            anchors=tuple(graph.get("rounds") or []),
            calls=graph.get("calls"),
            naive_calls=graph.get("naive_calls"),
            edges=edges,
        )


EXACT_ANSWER = "Exact answer"
IDEAL_ANSWER = "Ideal answer"
CONFIDENCE = "Confidence"
SUPPORT = "Support"
CITED_EVIDENCE = "Cited evidence"
"""The passages the answer rests on, each PMID with its title and supporting sentence."""
RETRIEVED_DOCUMENTS = "Retrieved documents"
"""The ranked list BioASQ scores in phase A: retrieval order, never re-ordered by citation."""
RETRIEVAL_ORDER = "retrieval order"
NO_EVIDENCE = "none: the answer cites no passage"


@dataclass(frozen=True)
class Cited:
    """A passage the answer rests on."""

    pmid: str
    title: str
    sentence: str
    """The sentence of it that supports the answer ("" when none was found)."""
    relevance: str = ""
    """Whether it addresses the question, in words ("" when not judged)."""


@dataclass(frozen=True)
class Retrieved:
    """A retrieved document, in retrieval order."""

    pmid: str
    title: str
    cited: bool
    """Whether the answer cites it."""
    relevance: str = ""
    """Whether it addresses the question, in words ("" when not judged)."""


@dataclass(frozen=True)
class AnswerBlock:
    """A run's answer: ask and chat print it, the HTML export draws it, in the same words."""

    qtype: str
    exact: str | None
    """The exact answer as words; None for a summary, or when nothing was supported."""
    ideal: str
    insufficient: bool
    confidence: str
    support: str | None
    """What the support check says of a given answer; None when it refused (or is older)."""
    evidence: tuple[Cited, ...] | None
    """None for a result kept from before cited evidence was: nothing to say either way."""
    documents: tuple[Retrieved, ...]
    more: int = 0
    """Retrieved documents left out of `documents`."""


@dataclass(frozen=True)
class ModelCall:
    """One model call: what it was (model, kind, temperature, cost), its prompt and output."""

    facts: tuple[str, ...]
    messages: tuple[tuple[str, str], ...]
    """(role, content) of each prompt message."""
    raw: str
    error: str
    label: str = ""
    """Where it stands among the step's calls ("call 2/5"), when shown among them."""


Block = Facts | Lines | Table | RelationGraph | AnswerBlock | ModelCall


def cell(value: Any) -> str:
    """Return a value as a table cell: strings as they are, lists joined, the rest as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "; ".join(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def decision_blocks(decision: Decision | None, *, title: str = "decision") -> list[Block]:
    """Return a decision's blocks: who decided and why, its answers, evidence order, settings."""
    if not decision:
        return []
    blocks: list[Block] = [
        Facts(f"{title} ({decision['strategy']}, by {decision['source']}): {decision['why']}")
    ]
    rows = []
    for rank, answer in enumerate(decision["answers"][:10], 1):
        said = answer["answer"]
        text = "; ".join(said) if isinstance(said, list) else str(said)
        rows.append((str(rank), text, f"{answer['support']:g}", ", ".join(answer["cited"])))
    if rows:
        header = ("#", "answer", "support", "cites")
        blocks.append(Table("Answers", header, tuple(rows), frozenset({0, 2})))
    else:
        blocks.append(Facts("no answer"))
    if decision["order"]:
        blocks.append(Facts(f"evidence order: {' '.join(decision['order'])}"))
    if decision["settings"]:
        settings = ", ".join(f"{k}={v}" for k, v in decision["settings"].items())
        blocks.append(Facts(f"settings: {settings}"))
    return blocks
