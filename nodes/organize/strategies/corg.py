"""corg: the Context Organizer: pair relations, conflict-free groups, each group answered apart.

SEE: Lee et al., "Generating Answers from Complex, Interrelated Contexts": the graph
constructor is relations.py, the reranker grouping.py (and the plural question of a group of
several, answers.py), the aggregator aggregate.py (every group's answer with the contexts
carrying it makes the decision). Who answers each group is organize.corg_answers: the
ensemble strategy's members (the default, quorum's composition: the ensemble node answers the
groups written here) or one call per group here (answers.py, the paper's aggregator).
organize.corg_relations "none" is its control: no relation graph at all.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from infra.models import ChatModel
from nodes.context import Context
from nodes.organize.aggregate import supported_by
from nodes.organize.answers import answer_groups, passage_chars, unanswered_groups
from nodes.organize.grouping import Grouping, group_contexts
from nodes.organize.relations import PairRelation, RelationGraph, build_relation_graph
from nodes.organize.strategies.registry import OrganizeStrategy, register
from nodes.passages import clip, defused
from nodes.state import Call, Organized, Passage, Relation
from prompts import render


@register("corg")
class Corg(OrganizeStrategy):
    """Relate every pair the relation graph needs, group without conflicts, answer each group."""

    forms_groups = True

    async def organize(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        model: ChatModel,
        qtype: str,
    ) -> Organized:
        """Return the organized contexts, the relation graph, the groups and their answers."""
        return await organize_contexts(
            question,
            contexts,
            model,
            qtype=qtype,
            top_k=ctx.settings.organize.top_k,
            max_concurrency=ctx.settings.ensemble.max_concurrency,
            relations=ctx.settings.organize.corg_relations,
            answers=ctx.settings.organize.corg_answers,
        )

    def settings(self, ctx: Context, model: ChatModel) -> dict[str, Any]:
        """Return CORG's settings: prompt budgets, concurrency, reformulation, relations."""
        top_k = ctx.settings.organize.top_k
        return super().settings(ctx, model) | {
            "relation_chars": passage_chars(model, 2, top_k),
            "context_chars": model.context_chars,
            "max_concurrency": ctx.settings.ensemble.max_concurrency,
            "temperature": 0.0,
            "reformulate": True,
            "relations": ctx.settings.organize.corg_relations,
            "answers": ctx.settings.organize.corg_answers,
        }


async def organize_contexts(
    question: str,
    contexts: list[Passage],
    model: ChatModel,
    *,
    qtype: str,
    top_k: int,
    max_concurrency: int,
    relations: Literal["graph", "none"] = "graph",
    answers: Literal["ensemble", "organize"] = "organize",
) -> Organized:
    """Relate the contexts, group them, and ask or answer each group; return the node's update.

    Args:
        question: The question as asked.
        contexts: The top contexts, in rank order.
        model: The organize model.
        qtype: The question type.
        top_k: organize.top_k.
        max_concurrency: Most model calls in flight at once.
        relations: "graph" builds the relation graph; "none" is the control without it: no
            pair is asked, so every pair counts as unrelated (nothing dropped, nothing split)
            and the contexts go through the same dealing and aggregator.
        answers: "organize" answers each group here (the paper's aggregator); "ensemble"
            writes each group with its question form only, for the ensemble to answer.
    """
    calls: list[Call] = []
    triples: dict[int, dict[str, str]] = {}
    bound = passage_chars(model, 2, top_k)
    cut: set[int] = set()

    def shown(i: int) -> str:
        doc = contexts[i]
        text = f"{doc.get('title') or ''} {doc.get('abstract') or ''}".strip()
        if len(text) > bound:
            cut.add(i)
        return defused(clip(text, bound))  # the template quotes the pair as evidence

    async def relate(i: int, j: int) -> str:
        messages = render("organize_relation", question=question, first=shown(i), second=shown(j))
        reply = await model.structured(PairRelation, messages, temperature=0.0)
        calls.append(reply.record("organize"))
        if reply.value is None:
            raise RuntimeError(reply.error or "no relation")
        triples.setdefault(i, reply.value.first.model_dump())
        triples.setdefault(j, reply.value.second.model_dump())
        return reply.value.label

    if relations == "none":
        graph = RelationGraph(n=len(contexts))  # no edge: every pair reads as unrelated
    else:
        graph = await build_relation_graph(len(contexts), relate, max_concurrency=max_concurrency)
    grouping = group_contexts(graph, {i: t["descriptor"] for i, t in triples.items()}, top_k=top_k)
    docs = [[contexts[i] for i in group] for group in grouping.groups]
    if answers == "ensemble":
        groups = await unanswered_groups(
            model, question, docs, calls, max_concurrency=max_concurrency
        )
    else:
        groups = await answer_groups(
            model, question, qtype, docs, calls, max_concurrency=max_concurrency, top_k=top_k
        )
    for group, shape in zip(groups, group_shapes(contexts, grouping, graph), strict=True):
        group |= shape
        if answers == "organize":
            group["supported_by"] = supported_by(group, group["cited"])
    kept = sorted(i for group in grouping.groups for i in group)
    notes = _notes(graph, grouping, contexts)
    if relations == "none":
        notes.append("organize: corg_relations 'none' (control): no relation graph")
    if answers == "ensemble" and groups:
        notes.append(
            "organize: the ensemble answers each group, its strategy's vote deciding it "
            "(organize.corg_answers 'ensemble'); organize asked the plural questions only"
        )
    if cut:
        notes.append(
            f"organize: relation calls showed {len(cut)} passage(s) cut at {bound} characters "
            "(the model's context_chars x organize.top_k, shared by two passages)"
        )
    return {
        "organized": [contexts[i] for i in kept],
        "relations": _relations(graph, contexts),
        "relation_graph": graph.to_dict() | {"pmids": [c["pmid"] for c in contexts]},
        "groups": groups,
        "triples": {contexts[i]["pmid"]: t for i, t in sorted(triples.items())},
        "calls": calls,
        "notes": notes,
    }


class GroupShape(TypedDict):
    """What the reranker knows of one group, whoever answers it (the Group fields of that name)."""

    covers: list[str]
    twins: dict[str, list[str]]
    rivals: list[str]


def group_shapes(
    contexts: list[Passage], grouping: Grouping, graph: RelationGraph
) -> list[GroupShape]:
    """Return per group what it covers, each context's twins and its counterfactual side.

    Whoever answers the group (organize or the ensemble) weighs the answer by them
    (aggregate.supported_by).
    """
    pmid = [c["pmid"] for c in contexts]
    homes = grouping.homes()
    shapes: list[GroupShape] = []
    for group, covered, side in zip(
        grouping.groups, grouping.covers(), grouping.sides(graph), strict=True
    ):
        twins = {pmid[t]: sorted(i for i, home in homes.items() if home == t) for t in group}
        shapes.append(
            {
                "covers": [pmid[i] for i in covered],
                "twins": {pmid_: [pmid[i] for i in d] for pmid_, d in twins.items() if d},
                "rivals": [pmid[i] for i in side],
            }
        )
    return shapes


def _relations(graph: RelationGraph, contexts: list[Passage]) -> list[Relation]:
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


def _notes(graph: RelationGraph, grouping: Grouping, contexts: list[Passage]) -> list[str]:
    dropped = ", ".join(f"{contexts[i]['pmid']} ({why})" for i, why in grouping.dropped.items())
    notes = [
        f"organize: {graph.calls} relation calls for {graph.naive_calls} pairs; "
        f"{len(grouping.groups)} group(s)"
    ]
    if dropped:
        notes.append(f"organize: dropped {dropped}")
    return notes
