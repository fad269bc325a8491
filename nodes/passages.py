"""Documents as the nodes hold and show them: cut to what the state keeps, numbered passages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodes.records import Passage

MAX_TITLE_CHARS = 2_000
MAX_ABSTRACT_CHARS = 40_000
"""What the state keeps of one document's text: every checkpoint stores it again, so a runaway
record must not grow them by megabytes (the longest PubMed abstracts are some 20,000 characters).
The cut keeps a prefix, so snippet offsets into the kept text stay exact."""


def bounded(doc: dict[str, Any]) -> dict[str, Any]:
    """Return the document with its title and abstract cut to what the state keeps."""
    title, abstract = doc.get("title") or "", doc.get("abstract") or ""
    if len(title) <= MAX_TITLE_CHARS and len(abstract) <= MAX_ABSTRACT_CHARS:
        return doc
    return {**doc, "title": title[:MAX_TITLE_CHARS], "abstract": abstract[:MAX_ABSTRACT_CHARS]}


def clip(text: str, chars: int) -> str:
    """Cut text at a word boundary to at most `chars` characters."""
    if len(text) <= chars:
        return text
    cut = text[:chars].rsplit(" ", 1)[0]
    return cut + " …"


def passages(docs: Sequence[Passage], chars: int) -> str:
    """Render documents as numbered passages headed by their PMID."""
    blocks = []
    for i, doc in enumerate(docs, 1):
        title = f"{doc['title']}\n" if doc.get("title") else ""
        blocks.append(f"[{i}] PMID {doc['pmid']}\n{title}{clip(doc.get('abstract') or '', chars)}")
    return "\n\n".join(blocks)
