"""CORG's single-run baselines that shrink the input: retrieve and summarize.

SEE: Lee et al., "Generating Answers from Complex, Interrelated Contexts" (§5.2, App. D.2).
retrieve: the model ranks the contexts by relevance and answer diversity (after Min et al.,
2021) and the top `organize.retrieve_top` (the paper's five) are answered in one call.
summarize: the model summarizes the contexts (after Xu et al., 2023) and one call answers from
the summary. Both ask the question as it stands: reformulation is CORG's aggregator's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from infra.models import ChatModel
from nodes.context import Context
from nodes.organize.answers import answer_groups, passage_chars
from nodes.organize.strategies.registry import OrganizeStrategy, register
from nodes.passages import passages
from nodes.state import Call, Group, Organized, Passage
from prompts import render

SUMMARY_CHARS = 1500
"""Longest summary: about the 355 tokens the paper's Summarize fed its reader (Table 12)."""


def ranking_schema(n: int) -> type[BaseModel]:
    """Return the retrieve call's output for n passages: their numbers, best first."""
    number = Literal[tuple(range(1, n + 1))]
    return create_model(
        "Ranking",
        ranking=(
            list[number],
            Field(
                description="Passage numbers, most useful first: relevant, and each adding an "
                "answer the ones before it lack",
                min_length=1,
                max_length=n,
            ),
        ),
    )


class Summary(BaseModel):
    """The contexts summarized for the question."""

    summary: str = Field(
        description="What the passages say that answers the question: every distinct answer, "
        "each with what it applies to and the PMIDs that give it",
        min_length=1,
        max_length=SUMMARY_CHARS,
    )


class Condense(OrganizeStrategy):
    """Shrink the contexts with one model call, then answer them in one more."""

    forms_groups = True

    def settings(self, ctx: Context, model: ChatModel) -> dict[str, Any]:
        """Return the baseline's settings: each prompt's budget, no reformulation."""
        return super().settings(ctx, model) | {
            "context_chars": model.context_chars,
            "temperature": 0.0,
            "reformulate": False,
        }

    async def answer(
        self,
        ctx: Context,
        model: ChatModel,
        question: str,
        qtype: str,
        docs: list[Passage],
        calls: list[Call],
        shown: str | None = None,
    ) -> Group:
        """Answer the kept contexts (or what stands for them) in one call."""
        (group,) = await answer_groups(
            model,
            question,
            qtype,
            [docs],
            calls,
            max_concurrency=1,
            top_k=ctx.settings.organize.top_k,
            reformulate=False,
            shown=None if shown is None else [shown],
        )
        return group


@register("retrieve")
class Retrieve(Condense):
    """Keep the top contexts of the model's relevance-and-diversity ranking, answer them."""

    def settings(self, ctx: Context, model: ChatModel) -> dict[str, Any]:
        """Return the settings, with how many ranked contexts are kept."""
        return super().settings(ctx, model) | {"retrieve_top": ctx.settings.organize.retrieve_top}

    async def organize(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        model: ChatModel,
        qtype: str,
    ) -> Organized:
        """Return the kept contexts in the model's order, and their one group's answer."""
        top = ctx.settings.organize.retrieve_top
        shown = passages(contexts, passage_chars(model, len(contexts), ctx.settings.organize.top_k))
        messages = render("organize_retrieve", contexts=shown, question=question)
        reply = await model.structured(ranking_schema(len(contexts)), messages, temperature=0.0)
        calls = [reply.record("organize")]
        ranked = list(dict.fromkeys(n - 1 for n in reply.value.ranking)) if reply.value else []
        # A ranking shorter than `top` (or none) is filled in rank order: the paper keeps the
        # top five of a ranking of all, so the model's omissions are not taken as removals.
        given = len(ranked)
        ranked += [i for i in range(len(contexts)) if i not in ranked]
        kept = [contexts[i] for i in ranked[:top]]
        group = await self.answer(ctx, model, question, qtype, kept, calls)
        note = f"organize: retrieve kept {len(kept)} of {len(contexts)} contexts"
        note += f" ({given} ranked by the model)" if reply.value else f" ({reply.error})"
        return {
            "organized": kept,
            "relations": [],
            "groups": [group],
            "calls": calls,
            "notes": [note],
        }


@register("summarize")
class Summarize(Condense):
    """Summarize the contexts for the question, and answer from the summary."""

    def settings(self, ctx: Context, model: ChatModel) -> dict[str, Any]:
        """Return the settings, with the summary's bound."""
        return super().settings(ctx, model) | {"summary_chars": SUMMARY_CHARS}

    async def organize(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        model: ChatModel,
        qtype: str,
    ) -> Organized:
        """Return every context, and the one answer given from their summary."""
        shown = passages(contexts, passage_chars(model, len(contexts), ctx.settings.organize.top_k))
        messages = render("organize_summarize", contexts=shown, question=question)
        reply = await model.structured(Summary, messages, temperature=0.0)
        calls = [reply.record("organize")]
        pmids = [c["pmid"] for c in contexts]
        if reply.value is None:
            group: Group = {
                "pmids": pmids,
                "question": question,
                "answer": "",
                "cited": [],
                "error": f"summary failed: {reply.error}",
            }
        else:
            summary = f"Summary of PMIDs {', '.join(pmids)}:\n{reply.value.summary.strip()}"
            group = await self.answer(ctx, model, question, qtype, contexts, calls, shown=summary)
        return {"organized": contexts, "relations": [], "groups": [group], "calls": calls}
