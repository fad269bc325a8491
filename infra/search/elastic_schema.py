"""What an Elasticsearch index holds: its mapping, versioned by analysis, and documents in and out.

`title`, `abstract` and `mesh` hold the en_stem terms of the text (`infra.search.analysis`),
space-joined and split again by the prebuilt `whitespace` analyzer, so positions survive and
phrases work. The integ-test distribution has no analysis-common (no `english` analyzer, no
stemmer, no `whitespace` tokenizer for a custom analyzer), but the prebuilt analyzer is in core.
The text as given is kept under `original` (in `_source` only, never indexed) for `fetch`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infra.search.analysis import VERSION, analyze

ANALYZER = "whitespace"
META_KEY = "quorum_analysis"
SOURCE_FIELDS = ("pmid", "original", "year", "journal")


def mappings(dims: int | None) -> dict[str, Any]:
    """Return the mappings of a new index (with `dims`-dimensional vectors when given)."""
    stems = {"type": "text", "analyzer": ANALYZER}
    properties: dict[str, Any] = {
        "pmid": {"type": "keyword"},
        "title": stems,
        "abstract": stems,
        "mesh": stems,
        "original": {"type": "object", "enabled": False},
        "year": {"type": "integer"},
        "journal": {"type": "keyword", "ignore_above": 512},
    }
    if dims is not None:
        # flat = float32 vectors scored exactly; similarities only ever score given ids.
        properties["embedding"] = {
            "type": "dense_vector",
            "dims": dims,
            "similarity": "cosine",
            "index": True,
            "index_options": {"type": "flat"},
        }
    return {"dynamic": "strict", "_meta": {META_KEY: VERSION}, "properties": properties}


def checked_properties(index: str, mapping: dict[str, Any]) -> dict[str, Any]:
    """Return an index's field mappings; ValueError when its terms come from another analysis."""
    have = (mapping.get("_meta") or {}).get(META_KEY)
    if have != VERSION:
        built = f"with analysis {have!r}" if have else "without quorum's client-side analysis"
        raise ValueError(
            f"Elasticsearch index {index!r} was built {built}, but this version searches "
            f"{VERSION!r} terms: delete the index and re-index it "
            f"(quorum index --backend elasticsearch --index {index} ...)"
        )
    return mapping.get("properties", {})


def to_source(doc: dict[str, Any], vector: np.ndarray | None) -> dict[str, Any]:
    """Return the `_source` of a document: its stems to search, its text as given to fetch."""
    mesh = doc.get("mesh") or []
    original = {
        "title": doc.get("title") or "",
        "abstract": doc.get("abstract") or "",
        "mesh": [mesh] if isinstance(mesh, str) else list(mesh),
    }
    source = {
        "pmid": str(doc["pmid"]),
        "title": _stems(original["title"]),
        "abstract": _stems(original["abstract"]),
        # One text, as embedded stores it: a phrase may run on from one heading to the next.
        "mesh": _stems(" ; ".join(original["mesh"])),
        "original": original,
        "year": doc.get("year"),
        "journal": doc.get("journal") or None,
    }
    if vector is not None and np.any(vector):  # cosine rejects zero vectors: store none
        source["embedding"] = np.round(vector.astype(np.float64), 7).tolist()
    return source


def from_source(pmid: str, source: dict[str, Any]) -> dict[str, Any]:
    """Return the document `fetch` gives back from its `SOURCE_FIELDS`."""
    original = source.get("original") or {}
    return {
        "pmid": pmid,
        "title": original.get("title") or "",
        "abstract": original.get("abstract") or "",
        "journal": source.get("journal") or "",
        "year": source.get("year") or None,
        "mesh": list(original.get("mesh") or []),
    }


def _stems(text: str) -> str:
    # NOTE: a word of 40+ bytes is dropped, leaving a position gap in tantivy but none here.
    return " ".join(analyze(text))
