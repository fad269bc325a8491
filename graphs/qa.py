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


def build_graph(checkpointer: Checkpointer = None):
    """Compile the QA graph, optionally with a checkpointer (every run then becomes a trace)."""
    builder = StateGraph(
        QAState, context_schema=Context, input_schema=InputState, output_schema=OutputState
    )
    builder.add_node(generate_query)
    builder.add_node(search)
    builder.add_node(refine_query)
    builder.add_node(rerank)
    builder.add_node(organize)
    builder.add_node(ensemble)
    builder.add_node(synthesize)
    builder.add_node(fallback_search)
    builder.add_node(finalize)

    builder.add_edge(START, "generate_query")
    builder.add_edge("generate_query", "search")
    builder.add_conditional_edges("search", needs_refinement)
    builder.add_edge("refine_query", "search")
    builder.add_edge("rerank", "organize")
    builder.add_edge("organize", "ensemble")
    builder.add_edge("ensemble", "synthesize")
    builder.add_conditional_edges("synthesize", after_synthesis)
    builder.add_conditional_edges("fallback_search", after_fallback)
    builder.add_edge("finalize", END)
    return builder.compile(checkpointer=checkpointer, name="quorum-qa")


graph = build_graph()
