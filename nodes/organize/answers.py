"""Groups of contexts asked the question: answered here, or put in plural form for the ensemble.

One call per group answers it here, as CORG's aggregator and its baselines ask for it; with
organize.corg_answers "ensemble" only a group's plural form is asked, and the ensemble answers.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from infra.models import ChatModel
from nodes.answer_fields import Entity, checked_citations, pmid_type
from nodes.passages import passages
from nodes.state import Call, Group, Passage
from prompts import render

# The group's short answers by question type (none for summary: its answer is the words).
EXACT: dict[str, tuple[Any, Any]] = {
    "yesno": (Literal["yes", "no"], Field(description="yes or no, as the abstracts answer")),
    "factoid": (
        list[Entity],
        Field(
            description="Every short answer (entity name) the abstracts give, best supported first",
            max_length=5,
        ),
    ),
    "list": (
        list[Entity],
        Field(description="Every entity the abstracts give that answers", max_length=12),
    ),
}


class PluralQuestion(BaseModel):
    """The question in plural form."""

    question: str = Field(description="The question in plural form", min_length=1, max_length=500)


def passage_chars(model: ChatModel, shown: int, top_k: int) -> int:
    """Return how much of each passage a prompt showing `shown` passages may hold.

    The bound comes from the model's spec: one organize prompt may hold what base's single
    group shows, top_k passages of `context_chars` each, and fewer passages share that budget.
    A relation call (two passages) or a small group so sees whole passages wherever the model
    allows; NOTE: the 400-character cut relation calls had hid the answer of 72% of
    ConflictQA's counter passages, which often give it in their last sentence.
    """
    budget = model.context_chars * max(1, top_k)
    return max(model.context_chars, budget // max(1, shown))


def group_answer_schema(qtype: str, pmids: list[str]) -> type[BaseModel]:
    """Return one group's answer: words, short answers by type, and only that group's PMIDs."""
    fields: dict[str, Any] = {
        "answer": (
            str,
            Field(
                description="Every answer the abstracts give, each with what it applies to",
                max_length=600,
            ),
        )
    }
    if qtype in EXACT:
        fields["exact"] = EXACT[qtype]
    fields["cited_pmids"] = (
        list[pmid_type(pmids)],
        Field(description="Supporting PMIDs", max_length=5),
    )
    return create_model("GroupAnswer", **fields)


async def answer_groups(
    model: ChatModel,
    question: str,
    qtype: str,
    groups: list[list[Passage]],
    calls: list[Call],
    *,
    max_concurrency: int,
    top_k: int,
    reformulate: bool = True,
    shown: list[str] | None = None,
) -> list[Group]:
    """Answer every group of contexts, a few at a time; record the calls in `calls`.

    Args:
        model: The organize model.
        question: The question as asked.
        qtype: The question type, which picks the short answers' form.
        groups: The contexts of each group, in rank order.
        calls: Where the calls are recorded.
        max_concurrency: Most groups answered at once.
        top_k: organize.top_k, which sizes each prompt's passage budget.
        reformulate: Ask a group of several contexts in plural form (CORG's aggregator).
        shown: Per group, text shown instead of its passages (summarize's summary).
    """
    limit = asyncio.Semaphore(max_concurrency)

    async def one(k: int, docs: list[Passage]) -> Group:
        async with limit:
            return await _answer_group(
                model,
                question,
                qtype,
                docs,
                calls,
                top_k=top_k,
                reformulate=reformulate,
                shown=shown[k] if shown else None,
            )

    return list(await asyncio.gather(*(one(k, g) for k, g in enumerate(groups))))


async def plural_form(
    model: ChatModel, question: str, docs: list[Passage], calls: list[Call]
) -> str:
    """Return the question a group is asked: in plural form for a group of several contexts."""
    if len(docs) < 2:
        return question
    # CORG's finding: a plural question beats extra instructions for a multi-answer group.
    reply = await model.structured(PluralQuestion, render("organize_pluralize", question=question))
    calls.append(reply.record("organize"))
    return reply.value.question if reply.value else question


async def unanswered_groups(
    model: ChatModel,
    question: str,
    groups: list[list[Passage]],
    calls: list[Call],
    *,
    max_concurrency: int,
) -> list[Group]:
    """Return every group with the question it is to be asked, for the ensemble to answer.

    organize.corg_answers "ensemble": the plural form is organize's (CORG's reranker
    reformulates a group of several); the answer is the ensemble strategy's vote over the
    group's passages, so organize pays no answer call that the members would repeat.
    """
    limit = asyncio.Semaphore(max_concurrency)

    async def one(docs: list[Passage]) -> Group:
        async with limit:
            form = await plural_form(model, question, docs, calls)
        pmids = [d["pmid"] for d in docs]
        return {
            "pmids": pmids,
            "question": form,
            "answer": "",
            "cited": [],
            "error": None,
            "exact": [],
            "covers": list(pmids),
            "answered_by": "ensemble",
        }

    return list(await asyncio.gather(*(one(g) for g in groups)))


async def _answer_group(
    model: ChatModel,
    question: str,
    qtype: str,
    docs: list[Passage],
    calls: list[Call],
    *,
    top_k: int,
    reformulate: bool,
    shown: str | None,
) -> Group:
    form = await plural_form(model, question, docs, calls) if reformulate else question
    pmids = [d["pmid"] for d in docs]
    contexts = shown
    if contexts is None:
        contexts = passages(docs, passage_chars(model, len(docs), top_k))
    messages = render("organize_group", contexts=contexts, question=form)
    reply = await model.structured(group_answer_schema(qtype, pmids), messages, temperature=0.0)
    calls.append(reply.record("organize"))
    value = reply.value
    group: Group = {
        "pmids": pmids,
        "question": form,
        "answer": value.answer.strip() if value else "",
        "cited": checked_citations(list(value.cited_pmids), pmids, "organize")[0] if value else [],
        "error": reply.error,
        "exact": _exact(getattr(value, "exact", None)),
        "covers": list(pmids),
        "answered_by": "organize",
    }
    if shown is not None:
        group["shown"] = shown
    return group


def _exact(value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    return [text for item in items if (text := " ".join(str(item).split()))]
