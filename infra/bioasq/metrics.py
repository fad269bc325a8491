"""Retrieval measures: recall@k and BioASQ's document and snippet measures (edition 8 on)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.bioasq.formats import pmid_of


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Return the share of gold items among the top k."""
    wanted = set(gold)
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def average_precision(ranked: Sequence[str], gold: Sequence[str], *, cap: int = 10) -> float:
    """Return BioASQ's average precision of a submitted list (edition 8 on).

    Sum of precision@r at each relevant rank r, divided by min(cap, |gold|); 0 when nothing
    submitted is relevant (as the organizers' EvaluatorTask1b computes it).
    """
    wanted = set(gold)
    if not wanted:
        return 0.0
    hits, total = 0, 0.0
    for r, item in enumerate(ranked, 1):
        if item in wanted:
            hits += 1
            total += hits / r
    return total / min(cap, len(wanted)) if hits else 0.0


def _spans(snippets: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Group snippets by (PMID, section) as merged [begin, end) character intervals."""
    grouped: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for s in snippets:
        if s.get("beginSection") != s.get("endSection"):
            continue
        key = (pmid_of(s["document"]), s["beginSection"])
        grouped.setdefault(key, []).append(
            (int(s["offsetInBeginSection"]), int(s["offsetInEndSection"]))
        )
    merged = {}
    for key, spans in grouped.items():
        spans.sort()
        out = [list(spans[0])]
        for begin, end in spans[1:]:
            if begin <= out[-1][1]:
                out[-1][1] = max(out[-1][1], end)
            else:
                out.append([begin, end])
        merged[key] = [tuple(span) for span in out]
    return merged


def snippet_overlap(
    found: Sequence[dict[str, Any]], gold: Sequence[dict[str, Any]]
) -> tuple[int, int, int]:
    """Return (overlapping characters, characters found, gold characters) after merging overlaps."""
    mine, theirs = _spans(found), _spans(gold)
    size = sum(e - b for spans in mine.values() for b, e in spans)
    gold_size = sum(e - b for spans in theirs.values() for b, e in spans)
    overlap = 0
    for key, spans in mine.items():
        for b, e in spans:
            for gb, ge in theirs.get(key, []):
                overlap += max(0, min(e, ge) - max(b, gb))
    return overlap, size, gold_size


def snippet_recall(found: Sequence[dict[str, Any]], gold: Sequence[dict[str, Any]]) -> float:
    """Return the share of gold snippet characters that found snippets cover."""
    overlap, _, gold_size = snippet_overlap(found, gold)
    return overlap / gold_size if gold_size else 0.0
