"""What an Elasticsearch index holds: its mapping, versioned by analysis, and documents in and out.

`title`, `abstract` and `mesh` hold the en_stem terms of the text (`infra.search.analysis`),
space-joined and split again by the prebuilt `whitespace` analyzer, so positions survive and
phrases work; `title` and `abstract` are copied into `text`, the one field unqualified words are
scored against (an index made before it has no `text`: its queries score the two fields). The
integ-test distribution has no analysis-common (no `english` analyzer, no stemmer, no
`whitespace` tokenizer for a custom analyzer), but the prebuilt analyzer is in core.
The text as given is kept under `original` (in `_source` only, never indexed) for `fetch`.
Vectors are a `dense_vector` whose `index_options` type is `search.elasticsearch_vector_index`
(flat float32 by default; int8 and bbq quantize them), the model that made them named in
`_meta`; an index may gain the field later, when `quorum embed` adds vectors. Another model's
vectors go into a field of their own (`embedding_2`, …, named in `_meta` while they are computed)
and `_meta` moves the index over to it when every document has one.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from infra.search.analysis import VERSION, analyze
from infra.search.query import COMBINED

ANALYZER = "whitespace"
META_KEY = "quorum_analysis"
MODEL_KEY = "quorum_embedding_model"
FIELD_KEY = "quorum_vector_field"
"""`_meta` key naming the field that holds the vectors searches use (default `embedding`)."""
REEMBED_KEY = "quorum_reembed"
"""`_meta` key of another model's vectors being computed: their field, model and dimension."""
VECTOR_FIELD = "embedding"


def vector_field_name(meta: dict[str, Any]) -> str:
    """Return the field holding the vectors searches use, as an index's `_meta` names it."""
    return str(meta.get(FIELD_KEY) or VECTOR_FIELD)


SOURCE_FIELDS = ("pmid", "original", "year", "journal")


def vector_field(dims: int, index_type: str = "flat") -> dict[str, Any]:
    """Return the `embedding` field: `dims` floats, cosine, stored as `index_type` says."""
    # flat kinds are brute-forced over the ids filter `similarities` gives (no graph to build);
    # the quantized ones keep the float32 vectors on disk too, for rescoring.
    return {
        "type": "dense_vector",
        "dims": dims,
        "similarity": "cosine",
        "index": True,
        "index_options": {"type": index_type},
    }


def mappings(
    dims: int | None, *, index_type: str = "flat", model: str | None = None
) -> dict[str, Any]:
    """Return the mappings of a new index (with `dims`-dimensional vectors when given)."""
    stems = {"type": "text", "analyzer": ANALYZER}
    # title and abstract are copied into one field, as two values: the embedded engine's `text`
    # (tantivy leaves a gap of one position between a field's values; so does this gap).
    combined = {**stems, "position_increment_gap": 1}
    properties: dict[str, Any] = {
        "pmid": {"type": "keyword"},
        "title": {**stems, "copy_to": COMBINED},
        "abstract": {**stems, "copy_to": COMBINED},
        COMBINED: combined,
        "mesh": dict(stems),
        "original": {"type": "object", "enabled": False},
        "year": {"type": "integer"},
        "journal": {"type": "keyword", "ignore_above": 512},
    }
    meta = {META_KEY: VERSION}
    if dims is not None:
        properties["embedding"] = vector_field(dims, index_type)
        if model:
            meta[MODEL_KEY] = model
    return {"dynamic": "strict", "_meta": meta, "properties": properties}


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


def to_source(
    doc: dict[str, Any],
    vector: np.ndarray | None,
    *,
    packed: bool = False,
    field: str = VECTOR_FIELD,
) -> dict[str, Any]:
    """Return the `_source` of a document: its stems to search, its text as given to fetch.

    `packed` sends the vector as base64 float32 (Elasticsearch 9.3+): a 384-dim vector is
    2 KB of text instead of 3-4 KB of JSON numbers to build, send and parse.
    """
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
        source[field] = vector_value(vector, packed=packed)
    return source


def vector_value(vector: np.ndarray, *, packed: bool) -> str | list[float]:
    """Return a vector as Elasticsearch takes it: base64 big-endian float32, or a JSON list."""
    if packed:
        return base64.b64encode(np.asarray(vector, dtype=">f4").tobytes()).decode("ascii")
    return np.round(np.asarray(vector, dtype=np.float64), 7).tolist()


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
