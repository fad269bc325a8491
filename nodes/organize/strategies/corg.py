"""corg: the Context Organizer: pair relations, conflict-free groups, one answer per group."""

from __future__ import annotations

from typing import Any

from infra.models import ChatModel
from nodes.context import Context
from nodes.evidence import clip
from nodes.organize.answers import answer_groups
from nodes.organize.grouping import Grouping, group_contexts
from nodes.organize.relations import PairRelation, RelationGraph, build_relation_graph
from nodes.organize.strategies.registry import OrganizeStrategy, register
from prompts import render

PAIR_CHARS = 400


@register("corg")
class Corg(OrganizeStrategy):
    """Relate every pair the relation graph needs, group without conflicts, answer each group."""

    async def organize(
        self, ctx: Context, question: str, contexts: list[dict[str, Any]], model: ChatModel
    ) -> dict[str, Any]:
        """Return the organized contexts, the relation graph, the groups and their answers."""
        return await organize_contexts(
            question,
            contexts,
            model,
            top_k=ctx.settings.organize.top_k,
            max_concurrency=ctx.settings.ensemble.max_concurrency,
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
    answered = await answer_groups(
        model,
        question,
        [[contexts[i] for i in group] for group in grouping.groups],
        calls,
        max_concurrency=max_concurrency,
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
