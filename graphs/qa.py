"""The QA graph: question in, BioASQ-shaped answer out, every step checkpointed.

generate_query → search ⇄ refine_query (while hits < min_hits, bounded) → rerank → organize
→ ensemble → synthesize ⟲ (again at temperature 0 while confidence < min_confidence)
→ fallback_search (evidence insufficient) → rerank … | finalize
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer

from graphs.routers import after_fallback, after_synthesis, needs_refinement
from nodes.context import Context
from nodes.ensemble import ensemble
from nodes.fallback_search import fallback_search
from nodes.finalize import finalize
from nodes.generate_query import generate_query
from nodes.given_evidence import given_evidence
from nodes.organize import organize
from nodes.refine_query import refine_query
from nodes.rerank import rerank
from nodes.search import search
from nodes.state import InputState, OutputState, QAState
from nodes.synthesize import synthesize

NODES = (
    "generate_query",
    "search",
    "refine_query",
    "rerank",
    "organize",
    "ensemble",
    "synthesize",
    "fallback_search",
    "finalize",
)


PHASES = ("A", "A+", "B")
"""BioASQ Task B phases: A retrieves, A+ retrieves and answers, B answers from given snippets."""


def build_graph(checkpointer: Checkpointer = None, *, phase: str = "A+"):
    """Compile the QA graph, optionally with a checkpointer (every run then becomes a trace).

    Args:
        checkpointer: Where runs are checkpointed.
        phase: "A+" (default) is the whole graph; "A" stops after rerank (documents and
            snippets only); "B" starts from the question's given snippets (no search).
    """
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; choose one of {', '.join(PHASES)}")
    builder = StateGraph(
        QAState, context_schema=Context, input_schema=InputState, output_schema=OutputState
    )
    if phase in ("A", "A+"):
        builder.add_node(generate_query)
        builder.add_node(search)
        builder.add_node(refine_query)
        builder.add_node(rerank)
        builder.add_edge(START, "generate_query")
        builder.add_edge("generate_query", "search")
        builder.add_conditional_edges("search", needs_refinement)
        builder.add_edge("refine_query", "search")
    builder.add_node(finalize)
    builder.add_edge("finalize", END)
    if phase == "A":
        builder.add_edge("rerank", "finalize")
        return builder.compile(checkpointer=checkpointer, name="quorum-qa-phase-a")
    builder.add_node(organize)
    builder.add_node(ensemble)
    builder.add_node(synthesize)
    builder.add_edge("organize", "ensemble")
    builder.add_edge("ensemble", "synthesize")
    if phase == "B":
        builder.add_node(given_evidence)
        builder.add_edge(START, "given_evidence")
        builder.add_edge("given_evidence", "organize")
        # Phase B never searches elsewhere (its bounds allow no fallback round).
        builder.add_conditional_edges(
            "synthesize",
            after_synthesis,
            {"synthesize": "synthesize", "finalize": "finalize", "fallback_search": "finalize"},
        )
        return builder.compile(checkpointer=checkpointer, name="quorum-qa-phase-b")
    builder.add_node(fallback_search)
    builder.add_edge("rerank", "organize")
    builder.add_conditional_edges("synthesize", after_synthesis)
    builder.add_conditional_edges("fallback_search", after_fallback)
    return builder.compile(checkpointer=checkpointer, name="quorum-qa")


graph = build_graph()
