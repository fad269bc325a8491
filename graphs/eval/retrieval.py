"""Evaluations that run the graph's nodes over BioASQ golden questions."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from langgraph.runtime import Runtime
from tqdm import tqdm

from graphs.routers import needs_refinement
from infra.bioasq.formats import Question
from infra.bioasq.metrics import average_precision, recall_at, snippet_recall
from infra.search.keywords import keyword_query
from infra.search.query import QueryError
from infra.snippets import best_snippets
from nodes.context import Context
from nodes.generate_query import generate_query, limits
from nodes.refine_query import refine_query
from nodes.rerank import rerank
from nodes.search import search


async def retrieve(
    question: str, ctx: Context, *, query_mode: str, reranked: bool
) -> tuple[list[str], float]:
    """Run the retrieval nodes for one question; return the ranking and its search+rerank ms."""
    runtime = Runtime(context=ctx)
    state: dict[str, Any] = {"question": question}
    if query_mode == "llm":
        state |= await generate_query(state, runtime)
    else:
        state |= {"query": keyword_query(question), "limits": limits(ctx), "refinements": 0}
    started = time.perf_counter()
    state |= await search(state, runtime)
    while query_mode == "llm" and needs_refinement(state) == "refine_query":
        pause = time.perf_counter()
        state |= await refine_query(state, runtime)
        started += time.perf_counter() - pause  # the model's time is not retrieval time
        state |= await search(state, runtime)
    bm25 = [p for p, _ in state["candidates"]]
    if not reranked:
        return bm25, (time.perf_counter() - started) * 1000
    state |= await rerank(state, runtime)
    ms = (time.perf_counter() - started) * 1000
    head = [p for p, _ in state["ranked"]]
    seen = set(head)
    return head + [p for p in bm25 if p not in seen], ms


async def evaluate_retrieval(
    ctx: Context,
    questions: Sequence[Question],
    *,
    query_mode: str = "question",
    reranked: bool = True,
    snippets: bool = False,
) -> dict[str, Any]:
    """Score document (and optionally snippet) retrieval against the questions' gold."""
    scored = [q for q in questions if q.documents]
    recalls: dict[int, list[float]] = {10: [], 100: [], 1000: []}
    aps, snippet_scores, latencies, coverage, failures = [], [], [], [], 0
    for question in tqdm(
        scored, unit=" q", file=sys.stderr, dynamic_ncols=True, mininterval=1.0, disable=None
    ):
        try:
            ranked, ms = await retrieve(
                question.body, ctx, query_mode=query_mode, reranked=reranked
            )
        except QueryError:
            ranked, ms, failures = [], 0.0, failures + 1
        latencies.append(ms)
        # Recall counts the gold documents the index holds: the others cannot be retrieved
        # from this corpus whatever the ranking (gold_in_index reports their share).
        present = {d["pmid"] for d in ctx.search.fetch(question.documents)}
        coverage.append(len(present) / len(set(question.documents)))
        if present:
            for k in recalls:
                recalls[k].append(recall_at(ranked, list(present), k))
        aps.append(average_precision(ranked[:10], question.documents))
        if snippets and question.snippets:
            docs = ctx.search.fetch(ranked[:10])
            found = best_snippets(
                question.body, docs, ctx.embedder, limit=10, scorer=ctx.snippet_scorer
            )
            snippet_scores.append(snippet_recall(found, question.snippets))
    report = {
        "questions": len(scored),
        "doc_recall@10": _mean(recalls[10]),
        "doc_recall@100": _mean(recalls[100]),
        "doc_recall@1000": _mean(recalls[1000]),
        "doc_map": _mean(aps),
        "gold_in_index": _mean(coverage),
        "ms_per_query_p50": round(float(np.percentile(latencies, 50)), 2) if latencies else None,
        "ms_per_query_p95": round(float(np.percentile(latencies, 95)), 2) if latencies else None,
        "query_mode": query_mode,
        "reranked": reranked,
        "fusion": ctx.settings.rerank.fusion if reranked else None,
        "dense_candidates": ctx.settings.search.dense_candidates if reranked else 0,
        "backend": ctx.search.name,
        "index": ctx.settings.search.index,
        "failed_queries": failures,
    }
    if snippets:
        report["snippet_recall"] = _mean(snippet_scores)
    return report


def _mean(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None
