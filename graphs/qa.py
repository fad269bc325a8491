"""The QA graph: question in, BioASQ-shaped answer out, every step checkpointed.

generate_query → search ⇄ refine_query (while hits < min_hits, bounded) → rerank → organize
→ ensemble → synthesize ⟲ (again at temperature 0 while confidence < min_confidence)
→ fallback_search (evidence insufficient) → rerank … | finalize
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypedDict, get_args, get_type_hints

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer

from graphs.routers import after_fallback, after_synthesis, needs_refinement
from infra.bioasq.types import RETRIEVING_PHASES, check_phase
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


class ServerContext(TypedDict, total=False):
    """What LangGraph's own server may pass as a run's context: nothing quorum needs.

    NOTE: the server always sends a dict and coerces it into the graph's context schema; with
    quorum's Context dataclass (whose fields are clients) that fails before any node runs.
    """


def _with_default(fn: Callable, factory: Callable[[], Context]) -> Callable:
    """Give a node the default Context when the caller passed none (LangGraph's own server)."""

    async def node(state: QAState, runtime: Runtime[Context]) -> dict:
        if not isinstance(runtime.context, Context):
            # Built off the event loop: it imports torch and opens files, which the server's
            # loop refuses (blockbuster) and which would stall every other run meanwhile.
            runtime = runtime.override(context=await asyncio.to_thread(factory))
        return await fn(state, runtime)

    node.__name__ = fn.__name__
    node.__doc__ = fn.__doc__
    return node


def build_graph(
    checkpointer: Checkpointer = None,
    *,
    phase: str = "A+",
    default_context: Callable[[], Context] | None = None,
):
    """Compile the QA graph, optionally with a checkpointer (every run then becomes a trace).

    Args:
        checkpointer: Where runs are checkpointed.
        phase: "A+" (default) is the whole graph; "A" stops after rerank (documents and
            snippets only); "B" starts from the question's given snippets (no search).
        default_context: Builds the Context for runs started without one (`langgraph dev`).
    """
    phase = check_phase(phase)
    builder = StateGraph(
        QAState,
        context_schema=ServerContext if default_context else Context,
        input_schema=InputState,
        output_schema=OutputState,
    )

    def add(fn: Callable) -> None:
        builder.add_node(fn.__name__, _with_default(fn, default_context) if default_context else fn)

    if phase in RETRIEVING_PHASES:
        add(generate_query)
        add(search)
        add(refine_query)
        add(rerank)
        builder.add_edge(START, "generate_query")
        builder.add_edge("generate_query", "search")
        builder.add_conditional_edges("search", needs_refinement)
        builder.add_edge("refine_query", "search")
    add(finalize)
    builder.add_edge("finalize", END)
    if phase == "A":
        builder.add_edge("rerank", "finalize")
        return builder.compile(checkpointer=checkpointer, name="quorum-qa-phase-a")
    add(organize)
    add(ensemble)
    add(synthesize)
    builder.add_edge("organize", "ensemble")
    builder.add_edge("ensemble", "synthesize")
    if phase == "B":
        add(given_evidence)
        builder.add_edge(START, "given_evidence")
        builder.add_edge("given_evidence", "organize")
    else:
        add(fallback_search)
        builder.add_edge("rerank", "organize")
        builder.add_conditional_edges("fallback_search", after_fallback)
    builder.add_conditional_edges("synthesize", after_synthesis, _ends(after_synthesis, builder))
    name = "quorum-qa-phase-b" if phase == "B" else "quorum-qa"
    return builder.compile(checkpointer=checkpointer, name=name)


def _ends(router: Callable, builder: StateGraph) -> list[str]:
    """Return the nodes a router may choose that this graph has.

    Whether a phase may fall back is its bounds' to say (given_evidence allows phase B no
    round), not the graph's: a router that chose a missing node would fail the run.
    """
    return [n for n in get_args(get_type_hints(router)["return"]) if n in builder.nodes]
