"""Evaluations that run the graph's nodes over BioASQ golden questions."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from langgraph.runtime import Runtime
from tqdm import tqdm

from graphs.routers import needs_refinement
from infra.bioasq.formats import Question
from infra.bioasq.metrics import average_precision, recall_at, snippet_recall
from infra.search.fusion import blend
from infra.search.keywords import keyword_query
from infra.search.query import QueryError
from infra.snippets import chosen_snippets
from nodes.context import Context
from nodes.generate_query import generate_query, limits
from nodes.refine_query import refine_query
from nodes.rerank import cross_encoder_scores, rerank
from nodes.search import search


async def retrieve(
    question: str, ctx: Context, *, query_mode: str, reranked: bool
) -> tuple[list[str], float]:
    """Run the retrieval nodes for one question; return the ranking and its search+rerank ms."""
    ranked, _, ms = await retrieve_scored(question, ctx, query_mode=query_mode, reranked=reranked)
    return ranked, ms


async def retrieve_scored(
    question: str, ctx: Context, *, query_mode: str, reranked: bool
) -> tuple[list[str], list[float], float]:
    """Return the ranking, the scores of its reranked head, and the search+rerank ms."""
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
        return bm25, [], (time.perf_counter() - started) * 1000
    state |= await rerank(state, runtime)
    ms = (time.perf_counter() - started) * 1000
    head = [p for p, _ in state["ranked"]]
    seen = set(head)
    return head + [p for p in bm25 if p not in seen], [s for _, s in state["ranked"]], ms


def cross_encoder_views(
    question: str, ranked: list[str], scores: list[float], ctx: Context, weights: Sequence[float]
) -> dict[float | None, list[str]]:
    """Return the ranking each cross-encoder weight gives, the head scored by it once.

    The head is what rerank gives the cross-encoder (its top_n of the first stage's order) and
    each weight blends as rerank does, so a weight's ranking here is rerank's at that weight.
    """
    top_n = min(ctx.settings.rerank.cross_encoder.top_n, len(scores))
    head = ranked[:top_n]
    texts = {d["pmid"]: d for d in ctx.search.fetch(head)}
    ce = cross_encoder_scores(ctx, question, head, texts) if head else np.zeros(0, np.float32)
    first = np.array(scores[:top_n], dtype=np.float32)
    views: dict[float | None, list[str]] = {}
    for weight in weights:
        order = np.argsort(-blend(first, ce, weight), kind="stable") if head else []
        views[weight] = [head[i] for i in order] + ranked[top_n:]
    return views


async def evaluate_retrieval(
    ctx: Context,
    questions: Sequence[Question],
    *,
    query_mode: str = "question",
    reranked: bool = True,
    snippets: bool = False,
    weights: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Score document (and optionally snippet) retrieval against the questions' gold.

    With `weights`, each question's head is scored by the cross-encoder once and ranked at
    every weight: `cross_encoder_weights` reports each, the main figures are the settings'
    weight (added to the list), and the latency excludes the cross-encoder.
    """
    sweep = list(dict.fromkeys([*(weights or ()), ctx.settings.rerank.cross_encoder.weight]))
    if weights and (ctx.reranker is None or not reranked):
        raise ValueError("a cross-encoder weight sweep needs rerank.cross_encoder.path")
    first_stage = replace(ctx, reranker=None) if weights else ctx
    scored = [q for q in questions if q.documents]
    keys: list[float | None] = [*sweep] if weights else [None]
    main_key = ctx.settings.rerank.cross_encoder.weight if weights else None
    recalls: dict[float | None, dict[int, list[float]]] = {
        key: {10: [], 100: [], 1000: []} for key in keys
    }
    aps: dict[float | None, list[float]] = {key: [] for key in keys}
    snippet_scores, latencies, coverage, failures = [], [], [], 0
    for question in tqdm(
        scored, unit=" q", file=sys.stderr, dynamic_ncols=True, mininterval=1.0, disable=None
    ):
        try:
            ranked, head_scores, ms = await retrieve_scored(
                question.body, first_stage, query_mode=query_mode, reranked=reranked
            )
        except QueryError:
            ranked, head_scores, ms, failures = [], [], 0.0, failures + 1
        latencies.append(ms)
        views = (
            cross_encoder_views(question.body, ranked, head_scores, ctx, sweep)
            if weights
            else {None: ranked}
        )
        # Recall counts the gold documents the index holds: the others cannot be retrieved
        # from this corpus whatever the ranking (gold_in_index reports their share).
        present = {d["pmid"] for d in ctx.search.fetch(question.documents)}
        coverage.append(len(present) / len(set(question.documents)))
        for key, view in views.items():
            if present:
                for k in recalls[key]:
                    recalls[key][k].append(recall_at(view, list(present), k))
            aps[key].append(average_precision(view[:10], question.documents))
        if snippets and question.snippets:
            chosen = ctx.settings.snippets  # chosen as finalize chooses them
            docs = ctx.search.fetch(views[main_key][: chosen.documents])
            found = chosen_snippets(question.body, docs, ctx.embedder, chosen, ctx.snippet_scorer)
            snippet_scores.append(snippet_recall(found, question.snippets))
    report = {
        "questions": len(scored),
        "doc_recall@10": _mean(recalls[main_key][10]),
        "doc_recall@100": _mean(recalls[main_key][100]),
        "doc_recall@1000": _mean(recalls[main_key][1000]),
        "doc_map": _mean(aps[main_key]),
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
    if weights:
        rows = [
            {
                "weight": key,
                "doc_recall@10": _mean(recalls[key][10]),
                "doc_recall@100": _mean(recalls[key][100]),
                "doc_map": _mean(aps[key]),
            }
            for key in sweep
        ]
        report["cross_encoder_weight"] = main_key
        report["cross_encoder_weights"] = sorted(rows, key=lambda r: -(r["doc_map"] or 0))
    return report


def _mean(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None
