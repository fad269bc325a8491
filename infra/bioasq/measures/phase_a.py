"""Phase A: documents and snippets, scored as EvaluatorTask1b.EvaluatePhaseA scores them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.bioasq.measures.parsed import (
    EPSILON,
    Question,
    Snippet,
    challenge_version,
    div,
    exp,
    log,
    nz,
    pairs,
    total,
)


@dataclass
class _Scores:
    """SEE: data.CalculatedMeasures: every measure starts at 0 and is set only when defined."""

    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    ap: float = 0.0


def _ap_divisor(gold_size: int, version: int) -> float:
    # SEE: QuestionAnswerEvaluator.calculateAveragePrecision(Snippets): |gold| for BioASQ 2, 10 for
    # BioASQ 3-7, min(10, |gold|) since BioASQ 8. Submissions are never cut to 10 items, so more
    # than 10 relevant ones give an AP above 1.
    if version == 2:
        return float(gold_size)
    return 10.0 if version in (3, 5) else min(10.0, float(gold_size))


def _documents(gold: list[str], response: list[str], version: int) -> _Scores:
    s = _Scores()
    # SEE: QuestionAnswerEvaluator.calculatePRF: nothing submitted leaves every measure at 0.
    if response:
        tp = sum(1 for d in response if d in gold)
        fn = sum(1 for d in gold if d not in response)
        s.precision = tp / len(response)
        s.recall = tp / (tp + fn) if tp + fn else 0.0
        if s.precision and s.recall:
            s.f1 = 2 * s.precision * s.recall / (s.precision + s.recall)
    ap, hits = 0.0, 0
    for r, d in enumerate(response, 1):
        if d in gold:
            hits += 1
            ap += hits / r
    # SEE: calculateAveragePrecision: response.retainAll(gold) cuts the submission to its relevant
    # documents for every later use (EvaluatePhaseA scores each question twice).
    response[:] = [d for d in response if d in gold]
    s.ap = ap / _ap_divisor(len(gold), version) if response else 0.0
    return s


def _concatenate(snippets: list[Snippet]) -> None:
    # SEE: QuestionAnswerEvaluator.concatenateSnippets: merges overlapping snippets of one document
    # and section in place; after a merge the inner loop restarts at index 1, not 0.
    i = 0
    while i < len(snippets):
        j = 0
        while j < len(snippets) and i < len(snippets):  # NOTE: the Java fails if i runs off.
            a, b = snippets[i], snippets[j]
            if (
                j != i
                and a.document == b.document
                and (a.begin_section, a.end_section) == (b.begin_section, b.end_section)
                and a.overlaps(b)
            ):
                span = min(a.begin, b.begin), max(a.end, b.end)
                snippets[i] = Snippet(a.document, a.begin_section, a.end_section, *span)
                del snippets[j]
                j = 0
            j += 1
        i += 1


def _snippets(gold: list[Snippet], response: list[Snippet], version: int) -> _Scores:
    s = _Scores()
    _concatenate(gold)
    _concatenate(response)
    # SEE: calculatePRForSnippets: characters of each submitted snippet that overlap any gold
    # snippet of the same PMID (last URL part), over all submitted / all gold characters.
    if response:
        overlap = sum(r.overlap(g) for r in response for g in gold if r.doc_id == g.doc_id)
        size, gold_size = sum(r.size for r in response), sum(g.size for g in gold)
        s.precision = div(overlap, size) if size else 0.0
        s.recall = div(overlap, gold_size) if gold_size else 0.0
        if s.precision or s.recall:
            s.f1 = div(2 * s.precision * s.recall, s.precision + s.recall)
    # SEE: calculateAveragePrecisionSnippets, precisionAtRSnippet: documents compared as whole
    # strings here; relevanceSnippet returns 1 when any gold snippet shares the document, whether
    # or not they overlap (the Java's `if (overlap != 0);` has a stray semicolon).
    ap, overlap, size = 0.0, 0, 0
    for r in response:
        size += r.size
        overlap += sum(r.overlap(g) for g in gold if r.document == g.document)
        relevant = any(r.document == g.document for g in gold)
        ap += div(overlap, size) * (1.0 if relevant else 0.0)
    s.ap = div(ap, _ap_divisor(len(gold), version))
    return s


def _score(gold: Question, response: Question, version: int) -> tuple[_Scores, _Scores]:
    # SEE: QuestionAnswerEvaluator.calculateMeasuresForPair (documents and snippets).
    return (
        _documents(gold.documents, response.documents, version),
        _snippets(gold.snippets, response.snippets, version),
    )


def evaluate_phase_a(gold: dict, submission: dict, *, edition: int = 11) -> dict[str, float]:
    """Score a Phase A submission's documents and snippets against a golden file.

    Raises:
        FormatError: when either file has a shape the official evaluator cannot read.
    """
    version = challenge_version(edition)
    scored = [(g, r) for g, r in pairs(gold, submission, version) if r is not None]
    # SEE: EvaluatorTask1b.EvaluatePhaseA: two passes, one kept for documents, one for snippets;
    # each scores everything again on the same objects, so the snippet pass sees snippets merged
    # twice. Unsubmitted questions are skipped; from BioASQ 9 on, so are those without gold.
    docs = [_score(g, r, version)[0] for g, r in scored if not (version == 9 and not g.documents)]
    snips = [_score(g, r, version)[1] for g, r in scored if not (version == 9 and not g.snippets)]
    n, m = len(docs), len(snips)
    snip_logs = total(0.0 if math.isnan(s.ap) else log(s.ap + EPSILON) for s in snips)
    return {
        "questions": len(scored),
        "documents_questions": n,
        "snippets_questions": m,
        # SEE: MeanPrecisionArticles, MeanRecallArticles, MeanF1Articles, MapDocuments,
        # GMapDocuments: NaN counts as 0 (as log(epsilon) in GMAP); no questions gives 0 or NaN.
        "documents_precision": total(nz(s.precision) for s in docs) / n if n else 0.0,
        "documents_recall": total(nz(s.recall) for s in docs) / n if n else 0.0,
        "documents_f1": div(total(nz(s.f1) for s in docs), n),
        "documents_map": div(total(nz(s.ap) for s in docs), n),
        "documents_gmap": exp(
            div(
                total(log(EPSILON) if math.isnan(s.ap) else log(s.ap + EPSILON) for s in docs),
                n,
            )
        ),
        # SEE: MeanPrecisionSnippets ... GMapSnippets: a NaN AP adds log 1 to GMAP, and a log sum
        # of exactly 0 (or NaN) reports 0.
        "snippets_precision": div(total(nz(s.precision) for s in snips), m),
        "snippets_recall": div(total(nz(s.recall) for s in snips), m),
        "snippets_f1": div(total(nz(s.f1) for s in snips), m),
        "snippets_map": div(total(nz(s.ap) for s in snips), m),
        "snippets_gmap": 0.0 if math.isnan(snip_logs) or snip_logs == 0 else exp(snip_logs / m),
    }
