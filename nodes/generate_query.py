"""generate_query: the model writes a boolean query; the backend validates it before it runs."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from infra.bioasq import detect_type
from infra.search.keywords import copied_question, keyword_query, keywords
from infra.search.query import QueryError
from nodes.context import Context
from nodes.state import Call, Exchange, Limits, QAState, Query
from prompts import render


class Standalone(BaseModel):
    """A follow-up question rewritten to stand on its own."""

    question: str = Field(
        description="The question, understandable without the conversation", max_length=600
    )


HISTORY_TURNS = 3
"""Earlier turns a follow-up is read against."""
QUESTION_WORDS = 64
"""Words of a question searched in query_mode 'question' (far above any BioASQ question's)."""


async def standalone_question(
    ctx: Context, question: str, history: list[Exchange]
) -> tuple[str, Call]:
    """Rewrite a follow-up as a standalone question from the last turns; return it and the call."""
    turns = "\n".join(
        f"Q: {t.get('question', '')}\nA: {t.get('answer', '')}" for t in history[-HISTORY_TURNS:]
    )
    model = ctx.models.first("query")
    reply = await model.structured(
        Standalone, render("rewrite_question", history=turns, question=question), temperature=0.0
    )
    rewritten = reply.value.question.strip() if reply.value else ""
    return (rewritten or question), reply.record("generate_query")


class BooleanQuery(BaseModel):
    """A search query in quorum's boolean syntax."""

    query: str = Field(description="The boolean query", min_length=1, max_length=500)


async def generate_query(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Write, validate and if needed repair the query; else fall back to the question's keywords."""
    ctx = runtime.context
    if ctx.settings.search.query_mode == "question":
        return _from_question(state, ctx)
    question = state["question"]
    given = state.get("qtype")
    model = ctx.models.first("query")
    proposals: list[Query] = []
    calls: list[Call] = []
    rewritten: dict[str, Any] = {}
    if history := state.get("history"):
        # A follow-up ("which study said that?") is answered as the question it stands for.
        question, call = await standalone_question(ctx, question, history)
        calls.append(call)
        if question != state["question"]:
            rewritten = {"question": question, "asked": state["question"]}

    reply = await model.structured(BooleanQuery, render("generate_query", question=question))
    calls.append(reply.record("generate_query"))
    query = reply.value.query if reply.value else None
    error = reply.error or _invalid(ctx, query)
    proposals.append({"query": query, "source": "model", "error": error})

    if error and query:
        messages = render("repair_query", question=question, query=query, error=error)
        reply = await model.structured(BooleanQuery, messages)
        calls.append(reply.record("generate_query"))
        query = reply.value.query if reply.value else None
        error = reply.error or _invalid(ctx, query)
        proposals.append({"query": query, "source": "repair", "error": error})

    notes = []
    if query and not error and copied_question(query, question):
        # A small model often returns the question itself: a failure of this step, recorded as
        # such; asking it to repair its copy would only spend a call.
        error = "the query is the question copied (every word OR-ed matches nearly everything)"
        proposals[-1]["error"] = error
        notes.append("generate_query: the model copied the question; used the question's keywords")
    elif error:
        notes.append(
            "generate_query: the model's query failed validation twice; "
            "used the question's keywords"
        )
    if error:
        query = keyword_query(question)
        proposals.append({"query": query, "source": "keywords", "error": _invalid(ctx, query)})

    return {
        "qtype": given or detect_type(question),
        "qtype_source": "given" if given else "detected",
        "limits": limits(ctx),
        "query": query,
        "queries": proposals,
        "calls": calls,
        "notes": notes,
        "refinements": 0,
        **rewritten,
    }


def _from_question(state: QAState, ctx: Context) -> dict[str, Any]:
    """Search for the question's own words: no model is asked (search.query_mode 'question')."""
    question, given = state["question"], state.get("qtype")
    query = question_query(question)
    error = _invalid(ctx, query) if query else "the question has no searchable words"
    notes = [f"generate_query: the question cannot be searched ({error})"] if error else []
    if state.get("history"):
        notes.append("generate_query: query_mode 'question' asks no model; searched as asked")
    return {
        "qtype": given or detect_type(question),
        "qtype_source": "given" if given else "detected",
        "limits": limits(ctx),
        "query": query,
        "queries": [{"query": query, "source": "question", "error": error}],
        "calls": [],
        "notes": notes,
        "refinements": 0,
    }


def question_query(question: str) -> str:
    """Return the question's words OR-ed, as plain BM25 reads a question ('' when it has none).

    Only words are kept, so nothing the query language would read as syntax (operators,
    brackets, field colons, wildcards) survives; hyphenated words become phrases. Stopwords go.
    """
    words = keywords(question, limit=QUESTION_WORDS)
    return " OR ".join(f'"{w}"' if "-" in w else w for w in words)


def _invalid(ctx: Context, query: str | None) -> str | None:
    if not query:
        return "empty query"
    try:
        ctx.search.validate(query)
    except QueryError as exc:
        return str(exc)
    return None


def limits(ctx: Context) -> Limits:
    """Copy the routers' bounds from settings into the state."""
    s = ctx.settings
    return Limits(
        min_hits=s.search.min_hits,
        max_refinements=s.search.max_refinements,
        min_confidence=s.synthesis.min_confidence,
        max_attempts=s.synthesis.max_attempts,
        max_fallbacks=s.fallback.max_rounds if s.fallback.enabled else 0,
        min_contexts=s.fallback.min_contexts,
    )
