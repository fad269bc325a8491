"""The member calls: each view answered by its model, concurrently, with live progress."""

from __future__ import annotations

import asyncio
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field, create_model

from nodes.answer_fields import (
    MEMBER_INSTRUCTIONS,
    as_answers,
    checked_citations,
    member_field,
    pmid_type,
)
from nodes.ensemble.strategies import View
from nodes.passages import passages
from nodes.progress import report
from nodes.state import Call, Member, Passage
from prompts import render


def member_schema(qtype: str, pmids: list[str]) -> type[BaseModel]:
    """Return the structured answer a member gives for this question type and these passages."""
    answer_type, answer_field = member_field(qtype)
    return create_model(
        "MemberAnswer",
        answer=(answer_type, answer_field),
        pmids=(
            list[pmid_type(pmids)],
            Field(description="PMIDs supporting the answer", max_length=3),
        ),
    )


def cited_schema(qtype: str, shown: int) -> type[BaseModel]:
    """Return a CCV member's answer: one answer, the number of one passage, and a quote."""
    answer_type, answer_field = member_field(qtype)
    return create_model(
        "CitedAnswer",
        answer=(answer_type, answer_field),
        passage=(
            Literal[tuple(range(1, shown + 1))],
            Field(description="Number of the one passage that best supports the answer"),
        ),
        quote=(str, Field(description="A short quote from that passage", max_length=200)),
    )


class Ask(NamedTuple):
    """One member call to make: a view, the question it is asked, what its order indexes."""

    view: View
    question: str
    contexts: list[Passage]
    group: int | None = None
    """The CORG group it answers, from 1; None: the question's top-m."""


class Asked(NamedTuple):
    """One member call: the member as the state keeps it, its model call, its citation notes."""

    member: Member
    call: Call
    notes: list[str]


async def ask_members(asks: list[Ask], qtype: str, *, cited: bool) -> list[Asked]:
    """Ask every member concurrently; report "ensemble done/total" as each one returns."""
    # Each model bounds its own calls in flight (per endpoint, from its spec), so views of
    # different endpoints never wait for one another.
    done = 0

    async def counted(ask: Ask) -> Asked:
        nonlocal done
        member = await _member(ask, qtype, cited=cited)
        done += 1
        report("ensemble", done=done, total=len(asks))
        return member

    report("ensemble", done=0, total=len(asks))
    return list(await asyncio.gather(*(counted(ask) for ask in asks)))


async def _member(ask: Ask, qtype: str, *, cited: bool) -> Asked:
    view = ask.view
    docs = [ask.contexts[i] for i in view.order]
    model = view.model
    instructions = MEMBER_INSTRUCTIONS[qtype]
    if cited:
        instructions += " Give the number of the one passage that best supports it, and a quote."
        schema = cited_schema(qtype, len(docs))
    else:
        schema = member_schema(qtype, [d["pmid"] for d in docs])
    messages = render(
        "ensemble",
        instructions=instructions,
        contexts=passages(docs, model.context_chars),
        question=ask.question,
    )
    reply = await model.structured(schema, messages, temperature=view.temperature)
    value = reply.value
    member: Member = {
        "model": model.name,
        "view": view.number,
        "order": [d["pmid"] for d in docs],
        "temperature": view.temperature,
        "answer": as_answers(qtype, value.answer) if value else [],
        "pmids": [],
        "raw": reply.raw,
        "error": reply.error,
        "latency_s": round(reply.latency_s, 3),
        "tokens": reply.input_tokens + reply.output_tokens,
    }
    if ask.group is not None:
        member["group"] = ask.group
    notes: list[str] = []
    if value is not None and cited:
        member |= {"passage": value.passage, "quote": value.quote}
        member["pmids"] = [docs[value.passage - 1]["pmid"]]
    elif value is not None:
        member["pmids"], notes = checked_citations(
            list(value.pmids), [d["pmid"] for d in docs], f"ensemble member {view.number}"
        )
    return Asked(member, reply.record("ensemble"), notes)
