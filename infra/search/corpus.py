"""Corpus files and the embedded index built from them."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from infra.embeddings import Embedder, document_text
from infra.errors import UserError
from infra.search.embedded import EmbeddedIndex

DATA = Path(__file__).resolve().parents[1] / "data"
DEMO_DOCS = DATA / "pubmedqa_demo.jsonl.gz"
DEMO_VECTORS = DATA / "pubmedqa_demo.vectors.f16.npy"
DEMO_MODEL = "all-MiniLM-L6-v2"


class IndexMissing(UserError, FileNotFoundError):
    """The configured index has not been built."""


class CorpusError(UserError):
    """A corpus line that is not a document, naming the file and the line."""


def read_jsonl(
    path: Path, *, max_chars: int | None = None, lines: int | None = None
) -> Iterator[dict[str, Any] | str]:
    """Yield documents from a .jsonl or .jsonl.gz file, naming the line of any bad record.

    Each line is decoded on its own, so a byte that is not UTF-8 is named with its file and
    line. With `max_chars`, a longer line is never held whole: it is read past in chunks and
    yields the reason it was skipped (a string) in its place. With `lines`, only the first ones.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    limit = -1 if max_chars is None else max_chars + 1
    with opener(path, "rb") as fh:
        number = 0
        while (lines is None or number < lines) and (raw := fh.readline(limit)):
            number += 1
            if max_chars is not None and len(raw) > max_chars and not raw.endswith(b"\n"):
                size = len(raw)
                while (chunk := fh.readline(1 << 20)) and not chunk.endswith(b"\n"):
                    size += len(chunk)
                size += len(chunk)
                yield f"{path}:{number}: {size:,} characters, over the limit of {max_chars:,}"
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusError(
                    f"{path}:{number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                    f"{exc.start + 1}); save the file as UTF-8"
                ) from None
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(doc, dict) or not str(doc.get("pmid", "")).strip():
                raise CorpusError(f"{path}:{number}: a document needs a 'pmid'")
            yield doc


def demo_documents(embedder: Embedder | None) -> tuple[list[dict[str, Any]], np.ndarray | None]:
    """Return the shipped demo corpus and vectors for this embedder (precomputed for MiniLM)."""
    docs = list(read_jsonl(DEMO_DOCS))
    if embedder is None:
        return docs, None
    if embedder.name == DEMO_MODEL:
        # NOTE: the demo's vectors ship precomputed (40 s of embedding on 2 cores otherwise).
        return docs, np.load(DEMO_VECTORS).astype(np.float32)
    texts = [document_text(d.get("title", ""), d.get("abstract", "")) for d in docs]
    return docs, embedder.embed_documents(texts)


def ensure_index(
    index_dir: Path, name: str, embedder: Embedder | None, *, max_prefix: int
) -> EmbeddedIndex:
    """Open the embedded index, building the shipped demo corpus on first use."""
    try:
        return EmbeddedIndex(index_dir, max_prefix_expansions=max_prefix)
    except FileNotFoundError:
        if name != "demo":
            raise IndexMissing(f"index {name!r} does not exist under {index_dir.parent}") from None
    docs, vectors = demo_documents(embedder)
    model = embedder.name if embedder is not None else None
    EmbeddedIndex.build(index_dir, docs, vectors=vectors, embedding_model=model)
    return EmbeddedIndex(index_dir, max_prefix_expansions=max_prefix)
