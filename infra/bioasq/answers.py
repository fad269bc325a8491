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


def pubmed_url(pmid: str) -> str:
    """Return the PubMed URL form BioASQ uses for documents."""
    return f"http://www.ncbi.nlm.nih.gov/pubmed/{pmid}"


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
