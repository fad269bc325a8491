"""Synthetic PubMed-like corpora of any size, resampled from real abstracts' sentences.

Each synthetic abstract draws as many sentences as a random real abstract has, each sentence from
any real abstract; its title, year and MeSH come from random real documents. The real documents
are kept inside, spread evenly, so BioASQ questions still have their gold to find among
distractors written in the same vocabulary. A synthetic document's vector is the normalised mean
of the real vectors of the abstracts its sentences came from: precomputed, as ingestion with
vectors would be given, without running a model over millions of texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SYNTHETIC_PMID = 100_000_000
"""Synthetic documents are numbered from here: above every real PMID (about 41 million in 2025)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


@dataclass
class Batch:
    """Documents of a synthetic corpus, and their vectors when the source has them."""

    docs: list[dict[str, Any]]
    vectors: np.ndarray | None


class SentencePool:
    """The real documents, cut into sentences, ready to be resampled."""

    def __init__(self, docs: Sequence[dict[str, Any]], vectors: np.ndarray | None = None):
        if not docs:
            raise ValueError("no documents to resample")
        self.docs = list(docs)
        self.vectors = None if vectors is None else np.asarray(vectors, dtype=np.float32)
        sentences, owners, counts = [], [], []
        for i, doc in enumerate(self.docs):
            parts = [s for s in _SENTENCE_END.split(doc.get("abstract") or "") if s.strip()]
            sentences += parts
            owners += [i] * len(parts)
            counts.append(max(1, len(parts)))
        if not sentences:
            raise ValueError("the documents have no abstract text to resample")
        self.sentences = np.array(sentences, dtype=object)
        self.owners = np.array(owners, dtype=np.int64)
        self.counts = np.array(counts, dtype=np.int64)

    def batches(self, size: int, *, seed: int = 0, batch_size: int = 2000) -> Iterator[Batch]:
        """Yield a corpus of `size` documents (the real ones among them), in batches.

        The same size and seed give the same corpus, so each pass (with and without vectors)
        writes the same documents.
        """
        real = len(self.docs)
        if size < real:
            raise ValueError(f"a corpus of {size:,} cannot hold the {real:,} real documents")
        rng = np.random.default_rng(seed)
        # Real document j sits at position round(j * size / real): spread evenly.
        real_at = {int(j * size // real): j for j in range(real)}
        for start in range(0, size, batch_size):
            positions = range(start, min(size, start + batch_size))
            synthetic = [p for p in positions if p not in real_at]
            fake_docs, fake_vectors = self._synthesize(rng, synthetic)
            docs, rows, k = [], [], 0
            for p in positions:
                if p in real_at:
                    docs.append(self.docs[real_at[p]])
                    rows.append(("real", real_at[p]))
                else:
                    docs.append(fake_docs[k])
                    rows.append(("fake", k))
                    k += 1
            vectors = None
            if self.vectors is not None:
                vectors = np.stack(
                    [self.vectors[i] if kind == "real" else fake_vectors[i] for kind, i in rows]
                )
            yield Batch(docs, vectors)

    def _synthesize(
        self, rng: np.random.Generator, positions: list[int]
    ) -> tuple[list[dict[str, Any]], np.ndarray | None]:
        n = len(positions)
        if n == 0:
            return [], None
        lengths = self.counts[rng.integers(len(self.docs), size=n)]
        picks = rng.integers(len(self.sentences), size=int(lengths.sum()))
        titles = rng.integers(len(self.docs), size=n)
        years = rng.integers(len(self.docs), size=n)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        docs = []
        for i, position in enumerate(positions):
            chosen = picks[offsets[i] : offsets[i] + lengths[i]]
            source = self.docs[titles[i]]
            docs.append(
                {
                    "pmid": str(SYNTHETIC_PMID + position),
                    "title": source.get("title") or "",
                    "abstract": " ".join(self.sentences[chosen]),
                    "year": self.docs[years[i]].get("year"),
                    "mesh": list(source.get("mesh") or []),
                    "journal": "",
                }
            )
        vectors = None
        if self.vectors is not None:
            summed = np.add.reduceat(self.vectors[self.owners[picks]], offsets, axis=0)
            norms = np.linalg.norm(summed, axis=1, keepdims=True)
            vectors = summed / np.where(norms > 0, norms, 1.0)
        return docs, vectors
