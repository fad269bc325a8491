"""`quorum eval snippets`: phase-A snippets scored as the organizers score them, over a grid.

Each question is retrieved once (the question as the query, as `bioasq run --phase A --no-llm`
does) and the sentences of its top documents are scored once, by the configured scorer
(`snippets.scorer_path`) or by cosine; every combination of the selection settings (documents,
snippets per document, snippets in all, a score floor) is then chosen from those same scores and
scored with the BioASQ evaluator's snippet measures (mean F-measure over character offsets,
since BioASQ 9). Choose the settings on training questions, report on held-out ones.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from graphs.eval.retrieval import retrieve
from infra.bioasq.formats import Question
from infra.bioasq.measures import evaluate_phase_a
from infra.bioasq.urls import pmid_of, pubmed_url
from infra.search.query import QueryError
from infra.snippets import ScoredSentence, choose_snippets, located, score_sentences
from nodes.context import Context

EDITION = 12
"""Snippets are scored as the current evaluator scores them (its version 9, since BioASQ 9)."""


async def evaluate_snippets(
    ctx: Context,
    questions: Sequence[Question],
    *,
    documents: Sequence[int],
    per_document: Sequence[int],
    limits: Sequence[int],
    min_scores: Sequence[float | None],
) -> dict[str, Any]:
    """Score every combination of the selection settings; the best F-measure first."""
    asked = [q for q in questions if q.snippets]
    depth = max(documents)
    merge = ctx.settings.snippets.merge
    ranked: dict[str, list[str]] = {}
    scored: dict[str, list[ScoredSentence]] = {}
    for question in tqdm(
        asked, unit=" q", file=sys.stderr, dynamic_ncols=True, mininterval=1.0, disable=None
    ):
        try:
            order, _ = await retrieve(question.body, ctx, query_mode="question", reranked=True)
        except QueryError:
            order = []
        ranked[question.id] = order[:10]
        docs = ctx.search.fetch(order[:depth])
        scored[question.id] = await asyncio.to_thread(
            score_sentences, question.body, docs, ctx.embedder, scorer=ctx.snippet_scorer
        )
    gold = {"questions": [_gold(q) for q in asked]}
    at_text = at_their_text(ctx, asked)
    rows = []
    for d, p, n, floor in itertools.product(documents, per_document, limits, min_scores):
        chosen = {
            q.id: choose_snippets(
                scored[q.id], limit=n, per_doc=p, documents=d, min_score=floor, merge=merge
            )
            for q in asked
        }
        submission = {
            "questions": [
                {
                    "id": q.id,
                    "documents": [pubmed_url(pmid) for pmid in ranked[q.id]],
                    "snippets": chosen[q.id],
                }
                for q in asked
            ]
        }
        measures = evaluate_phase_a(gold, submission, edition=EDITION)
        moved = evaluate_phase_a(at_text, submission, edition=EDITION)
        rows.append(
            {
                "documents": d,
                "per_document": p,
                "limit": n,
                "min_score": floor,
                "snippets_f1": round(measures["snippets_f1"], 4),
                "snippets_precision": round(measures["snippets_precision"], 4),
                "snippets_recall": round(measures["snippets_recall"], 4),
                "snippets_map": round(measures["snippets_map"], 4),
                # The same, gold snippets scored where their text is in the index (see ceiling).
                "snippets_f1_at_text": round(moved["snippets_f1"], 4),
                "snippets_per_question": round(
                    float(np.mean([len(c) for c in chosen.values()])) if chosen else 0.0, 2
                ),
            }
        )
    rows.sort(key=lambda r: -r["snippets_f1"])
    scores = [s.score for found in scored.values() for s in found]
    return {
        "questions": len(asked),
        **ceiling(ctx, asked, gold),
        "scorer": str(ctx.settings.snippets.scorer_path or "cosine"),
        "index": ctx.settings.search.index,
        # Where a floor could go: the scores' spread, in the scorer's units.
        "score_quantiles": (
            {f"p{q}": round(float(np.percentile(scores, q)), 3) for q in (10, 50, 90, 99)}
            if scores
            else {}
        ),
        "best": rows[0] if rows else None,
        "rows": rows,
    }


def _gold(question: Question) -> dict[str, Any]:
    return {
        "id": question.id,
        "type": question.type,
        "body": question.body,
        "documents": question.documents,
        "snippets": question.snippets,
    }


def ceiling(ctx: Context, asked: Sequence[Question], gold: dict[str, Any]) -> dict[str, Any]:
    """Return what the index's own texts allow: the gold snippets found in them, scored.

    A snippet is scored by its offsets, so a corpus whose texts differ from PubMed's (the shared
    corpus rebuilt from snippets joins the gaps with " … ") caps every system's F-measure: the
    gold snippets' own text, located in the indexed documents, scores `ceiling_f1`; the share
    of gold snippets whose offsets point at their text there is `gold_offsets_in_index`.
    """
    pmids = {_pmid(s) for q in asked for s in q.snippets}
    docs = {d["pmid"]: d for d in ctx.search.fetch(sorted(pmids))}
    perfect, same, total = [], 0, 0
    for question in asked:
        found = []
        for snippet in question.snippets:
            total += 1
            at = located(snippet, docs.get(_pmid(snippet), {}))
            same += at is snippet  # its offsets point at its text
            if at is not None:
                found.append(at)
        perfect.append({"id": question.id, "documents": [], "snippets": found[:10]})
    best = evaluate_phase_a(gold, {"questions": perfect}, edition=EDITION)
    return {
        "ceiling_f1": round(best["snippets_f1"], 4),
        "gold_offsets_in_index": round(same / total, 4) if total else None,
    }


def at_their_text(ctx: Context, asked: Sequence[Question]) -> dict[str, Any]:
    """Return the questions as a golden file, each gold snippet moved to its text in the index.

    On a corpus holding PubMed's texts nothing moves; on one whose texts differ (the shared
    corpus, rebuilt from snippets) this scores the choice of sentences, not the corpus's offsets.
    """
    pmids = {_pmid(s) for q in asked for s in q.snippets}
    docs = {d["pmid"]: d for d in ctx.search.fetch(sorted(pmids))}
    return {
        "questions": [
            {
                **_gold(q),
                "snippets": [located(s, docs.get(_pmid(s), {})) or s for s in q.snippets],
            }
            for q in asked
        ]
    }


def _pmid(snippet: dict[str, Any]) -> str:
    try:
        return pmid_of(str(snippet.get("document", "")))
    except ValueError:
        return ""
