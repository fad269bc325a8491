"""One answer per group of contexts, as CORG and its ablations give them."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field, create_model

from infra.models import ChatModel
from nodes.evidence import checked_citations, passages, pmid_type
from prompts import render


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


async def answer_groups(
    model: ChatModel,
    question: str,
    groups: list[list[dict[str, Any]]],
    calls: list[dict[str, Any]],
    *,
    max_concurrency: int,
) -> list[dict[str, Any]]:
    """Answer every group of contexts, a few at a time; record the calls in `calls`."""
    limit = asyncio.Semaphore(max_concurrency)
    return list(
        await asyncio.gather(*(_answer_group(limit, model, question, g, calls) for g in groups))
    )


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
