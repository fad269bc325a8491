"""The Context Organizer's model calls: pair relations, plural questions, one answer per group."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field, create_model

from infra.models import ChatModel
from nodes.evidence import checked_citations, clip, passages, pmid_type
from nodes.organize.grouping import Grouping, baseline_groups, group_contexts
from nodes.organize.relations import PairRelation, RelationGraph, build_relation_graph
from prompts import render

PAIR_CHARS = 400


class PluralQuestion(BaseModel):
    """The question in plural form."""

    question: str = Field(description="The question in plural form", min_length=1, max_length=500)


def group_answer_schema(pmids: list[str]) -> type[BaseModel]:
    """Return one group's answer, citing only that group's PMIDs."""
    return create_model(
        "GroupAnswer",
        answer=(str, Field(description="The answer, with what it applies to", max_length=600)),
        cited_pmids=(list[pmid_type(pmids)], Field(description="Supporting PMIDs", max_length=5)),
    )


async def organize_contexts(
    question: str,
    contexts: list[dict[str, Any]],
    model: ChatModel,
    *,
    top_k: int,
    max_concurrency: int,
) -> dict[str, Any]:
    """Relate the contexts, group them, and answer each group; return the node's update."""
    calls: list[dict[str, Any]] = []
    triples: dict[int, dict[str, str]] = {}

    async def relate(i: int, j: int) -> str:
        a, b = contexts[i], contexts[j]
        messages = render(
            "organize_relation",
            question=question,
            first=clip(f"{a.get('title') or ''} {a.get('abstract') or ''}".strip(), PAIR_CHARS),
            second=clip(f"{b.get('title') or ''} {b.get('abstract') or ''}".strip(), PAIR_CHARS),
        )
        reply = await model.structured(PairRelation, messages, temperature=0.0)
        calls.append(reply.record("organize"))
        if reply.value is None:
            raise RuntimeError(reply.error or "no relation")
        triples.setdefault(i, reply.value.first.model_dump())
        triples.setdefault(j, reply.value.second.model_dump())
        return reply.value.label

    graph = await build_relation_graph(len(contexts), relate, max_concurrency=max_concurrency)
    grouping = group_contexts(graph, {i: t["descriptor"] for i, t in triples.items()}, top_k=top_k)
    limit = asyncio.Semaphore(max_concurrency)
    answered = await asyncio.gather(
        *(
            _answer_group(limit, model, question, [contexts[i] for i in group], calls)
            for group in grouping.groups
        )
    )
    kept = sorted(i for group in grouping.groups for i in group)
    return {
        "organized": [contexts[i] for i in kept],
        "relations": _relations(graph, contexts),
        "relation_graph": graph.to_dict() | {"pmids": [c["pmid"] for c in contexts]},
        "groups": answered,
        "triples": {contexts[i]["pmid"]: t for i, t in sorted(triples.items())},
        "calls": calls,
        "notes": _notes(graph, grouping, contexts),
    }


async def organize_baseline(
    question: str,
    contexts: list[dict[str, Any]],
    model: ChatModel,
    *,
    strategy: str,
    groups: int,
    seed: int,
    vectors: Any = None,
    max_concurrency: int,
) -> dict[str, Any]:
    """Group without relations (an ablation of CORG) and answer each group the same way."""
    calls: list[dict[str, Any]] = []
    grouped = baseline_groups(len(contexts), strategy, groups=groups, vectors=vectors, seed=seed)
    limit = asyncio.Semaphore(max_concurrency)
    answered = await asyncio.gather(
        *(_answer_group(limit, model, question, [contexts[i] for i in g], calls) for g in grouped)
    )
    return {
        "organized": contexts,
        "relations": [],
        "groups": answered,
        "calls": calls,
        "notes": [f"organize: {strategy} grouping, {len(grouped)} group(s), no relation calls"],
    }


async def _answer_group(
    limit: asyncio.Semaphore,
    model: ChatModel,
    question: str,
    docs: list[dict[str, Any]],
    calls: list,
) -> dict[str, Any]:
    async with limit:
        form = question
        if len(docs) > 1:
            # CORG's finding: a plural question beats extra instructions for a multi-answer group.
            reply = await model.structured(
                PluralQuestion, render("organize_pluralize", question=question)
            )
            calls.append(reply.record("organize"))
            form = reply.value.question if reply.value else question
        pmids = [d["pmid"] for d in docs]
        messages = render(
            "organize_group", contexts=passages(docs, model.context_chars), question=form
        )
        reply = await model.structured(group_answer_schema(pmids), messages, temperature=0.0)
        calls.append(reply.record("organize"))
    value = reply.value
    return {
        "pmids": pmids,
        "question": form,
        "answer": value.answer.strip() if value else "",
        "cited": checked_citations(list(value.cited_pmids), pmids, "organize")[0] if value else [],
        "error": reply.error,
    }


def _relations(graph: RelationGraph, contexts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "a": contexts[a]["pmid"],
            "b": contexts[b]["pmid"],
            "label": edge.label,
            "source": edge.source,
            "mirrored": edge.source == "mirrored",
        }
        for (a, b), edge in sorted(graph.edges.items())
    ]


def _notes(graph: RelationGraph, grouping: Grouping, contexts: list[dict[str, Any]]) -> list[str]:
    dropped = ", ".join(f"{contexts[i]['pmid']} ({why})" for i, why in grouping.dropped.items())
    notes = [
        f"organize: {graph.calls} relation calls for {graph.naive_calls} pairs; "
        f"{len(grouping.groups)} group(s)"
    ]
    if dropped:
        notes.append(f"organize: dropped {dropped}")
    return notes
