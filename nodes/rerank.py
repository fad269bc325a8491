"""rerank: BM25 (and dense) candidates to the top rerank.top_k, fusing BM25 with cosine."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from infra.embeddings import document_text
from infra.search.fusion import blend, fuse
from infra.search.shortlist import fusion_cosines
from nodes.context import Context
from nodes.passages import bounded
from nodes.state import Document, FirstStage, Passage, QAState


async def rerank(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Score every candidate (index hits and fallback documents) and keep the best."""
    ctx = runtime.context
    return await asyncio.to_thread(_rerank, state, ctx)


def _rerank(state: QAState, ctx: Context) -> dict[str, Any]:
    settings = ctx.settings.rerank
    pool = state.get("pool") or {}
    candidates = [(p, s) for p, s in state.get("candidates", []) if p not in pool]
    question_vec = ctx.embedder.embed_query(state["question"])
    candidates, first_stage = _with_dense(ctx, candidates, pool, question_vec)
    pmids = [p for p, _ in candidates] + list(pool)
    if not pmids:
        return {"ranked": [], "contexts": [], "first_stage": first_stage}
    notes = []
    method = settings.fusion
    index_cos, read = (
        fusion_cosines(
            ctx.search,
            [p for p, _ in candidates],
            np.array([s for _, s in candidates], dtype=np.float32),
            question_vec,
            method=method,
            alpha=settings.alpha,
            rrf_k=settings.rrf_k,
            shortlist=max(settings.exact_shortlist, settings.top_k),
            keep=settings.top_k,
        )
        if candidates
        else (None, 0)
    )
    if index_cos is not None and read < len(candidates):
        notes.append(
            f"rerank: cosines of {len(candidates) - read:,} of {len(candidates):,} candidates "
            f"estimated from row codes, {read:,} read exactly (the top {settings.top_k} among them)"
        )
    has_vectors = index_cos is not None or not candidates
    if index_cos is None:
        if candidates:
            notes.append("rerank: the index stores no document vectors; kept BM25 order")
        index_cos = np.zeros(len(candidates), dtype=np.float32)
    pool_docs = list(pool.values())
    pool_vecs = ctx.embedder.embed_documents(
        [document_text(d.get("title", ""), d.get("abstract", "")) for d in pool_docs]
    )
    cosine = np.concatenate([index_cos, pool_vecs @ question_vec]) if pool_docs else index_cos
    bm25 = np.array([s for _, s in candidates], dtype=np.float32)
    if pool_docs:
        # Fallback documents have no BM25 score here; they enter at the candidates' median.
        bm25 = np.concatenate(
            [bm25, np.full(len(pool_docs), float(np.median(bm25)) if bm25.size else 1.0)]
        )
    method = method if has_vectors else "bm25"
    scores = (
        bm25 if method == "bm25" else fuse(bm25, cosine, method, settings.alpha, settings.rrf_k)
    )
    order = np.argsort(-scores, kind="stable")[: settings.top_k]
    ranked = [(pmids[i], round(float(scores[i]), 6)) for i in order]
    texts = _texts(ctx, pool, [p for p, _ in ranked[: max(settings.contexts, _head(ctx))]])
    if ctx.reranker is not None and ranked:
        head = ranked[: _head(ctx)]
        ce = cross_encoder_scores(ctx, state["question"], [p for p, _ in head], texts)
        weight = settings.cross_encoder.weight
        mixed = blend(np.array([s for _, s in head], dtype=np.float32), ce, weight)
        order = np.argsort(-mixed, kind="stable")
        ranked = [(head[i][0], round(float(mixed[i]), 6)) for i in order] + ranked[len(head) :]
        notes.append(f"rerank: cross-encoder rescored the top {len(head)} (weight {weight:g})")
    contexts: list[Passage] = []
    for pmid, score in ranked[: settings.contexts]:
        doc = texts.get(pmid)
        if doc:
            kept = bounded({k: doc.get(k) for k in ("pmid", "title", "abstract", "year")})
            contexts.append({**kept, "score": score})
    return {"ranked": ranked, "contexts": contexts, "notes": notes, "first_stage": first_stage}


def cross_encoder_scores(
    ctx: Context, question: str, pmids: list[str], texts: dict[str, Document]
) -> np.ndarray:
    """Return the cross-encoder's score of each head document (title and abstract) for it."""
    assert ctx.reranker is not None
    docs = [texts.get(p, {}) for p in pmids]
    passages = [document_text(d.get("title", ""), d.get("abstract", "")) for d in docs]
    return ctx.reranker.score(question, passages)


def _with_dense(
    ctx: Context,
    candidates: list[tuple[str, float]],
    pool: dict[str, Document],
    question_vec: np.ndarray,
) -> tuple[list[tuple[str, float]], FirstStage]:
    """Add the question's nearest documents by vector to BM25's candidates (BM25 score 0).

    Score 0 is what BM25 gives a document none of the query's terms match, and a document it
    ranked below search.max_candidates scores less than every candidate anyway.
    """
    k = ctx.settings.search.dense_candidates
    dense = [p for p, _ in ctx.search.nearest(question_vec, k)] if k else []
    found = {p for p, _ in candidates}
    added = list(dict.fromkeys(p for p in dense if p not in found and p not in pool))
    stage: FirstStage = {
        "bm25": len(candidates),
        "dense": len(dense),
        "both": sum(p in found for p in set(dense)),
        "dense_only": len(added),
        "pool": len(pool),
    }
    return candidates + [(p, 0.0) for p in added], stage


def _head(ctx: Context) -> int:
    return ctx.settings.rerank.cross_encoder.top_n if ctx.reranker is not None else 0


def _texts(ctx: Context, pool: dict[str, Document], pmids: list[str]) -> dict[str, Document]:
    """Return the documents' text, from the fallback pool or the index."""
    stored = {d["pmid"]: d for d in ctx.search.fetch([p for p in pmids if p not in pool])}
    return {p: pool.get(p) or stored[p] for p in pmids if p in pool or p in stored}
