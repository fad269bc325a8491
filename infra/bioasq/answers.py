"""Answer normalisation for voting and the BioASQ exact_answer shapes."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# Only a leading article goes: "vitamin A" and "hepatitis A" keep theirs.
_ARTICLES = re.compile(r"^(a|an|the)(\s+|$)")
_PUNCT = re.compile(r"[^\w\s%+.-]|(?<!\d)[.](?!\d)")


def normalize_answer(text: str) -> str:
    """Normalise for comparison: Unicode, case, punctuation, articles, spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = " ".join(_PUNCT.sub(" ", text).split())
    return _ARTICLES.sub("", text)


_LEAD = re.compile(
    r"^\s*(?:[-*•]|\(?\d+[.)]|(?:the\s+)?(?:final\s+)?answers?\s*(?:is|are|:)\s*:?)\s*",
    re.IGNORECASE,
)
_HEDGE = re.compile(r"^(?:possibly|probably|likely|perhaps|maybe)\s+", re.IGNORECASE)
_LIST_SPLIT = re.compile(r"\s*(?:;|\n|,)\s*(?:(?:and|or)\s+)?")
_CONJUNCTION = re.compile(r"\s+(?:and|or)\s+")


def format_exact(qtype: str, items: list[str], *, max_words: int = 8) -> list[str]:
    """Format extracted answers as BioASQ entities: the cheap step after extraction.

    The synthesis model extracts what answers the question; this step only shapes it. Items
    holding several entities ("IL-6, TNF and IL-1β") are split for list questions, on "and"
    only between short names (factoid items are kept whole: "5-fluorouracil and leucovorin"
    can be one answer); list markers,
    "the answer is" lead-ins, hedges and trailing punctuation go; duplicates (after
    normalisation) go; items longer than `max_words` words are sentences, not entities, and are
    dropped unless nothing else is left. Factoid keeps at most five.
    """
    if qtype not in ("factoid", "list"):
        return [i.strip() for i in items if i and i.strip()]
    pieces: list[str] = []
    for item in items:
        if qtype == "list":
            parts = []
            for part in _LIST_SPLIT.split(item):
                # "TNF and IL-6" is two entities; "signal transducer and activator of
                # transcription 3" is one: split on a conjunction only between short names.
                halves = _CONJUNCTION.split(part)
                short = all(len(h.split()) <= 3 for h in halves)
                parts.extend(halves if short else [part])
        else:
            parts = re.split(r"\s*[;\n]\s*", item)
        for part in parts:
            text = _HEDGE.sub("", _LEAD.sub("", part or "")).strip().strip(" .:;,'\"")
            if text:
                pieces.append(text)
    short = [p for p in pieces if len(p.split()) <= max_words] or pieces[:1]
    seen: dict[str, str] = {}
    for piece in short:
        seen.setdefault(normalize_answer(piece), piece)
    out = [p for key, p in seen.items() if key]
    return out[:5] if qtype == "factoid" else out


def exact_answer_shape(qtype: str, answers: list[str]) -> Any:
    """Shape ranked answer strings as BioASQ's exact_answer for a question type.

    yesno: "yes"/"no"; factoid: up to 5 candidates, each a list of synonyms; list: one
    single-item list per entity; summary: no exact answer (None).
    """
    cleaned = [a.strip() for a in answers if a and a.strip()]
    if qtype == "yesno":
        first = normalize_answer(cleaned[0]) if cleaned else ""
        return "yes" if first.startswith("yes") else "no"
    if qtype == "factoid":
        return [[a] for a in _dedupe(cleaned)[:5]]
    if qtype == "list":
        return [[a] for a in _dedupe(cleaned)]
    return None


def _dedupe(answers: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for answer in answers:
        seen.setdefault(normalize_answer(answer), answer)
    return [a for key, a in seen.items() if key]
