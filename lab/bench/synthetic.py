"""Synthetic PubMed-like corpora of any size, resampled from real abstracts' sentences.

Each synthetic abstract is as long as a PubMed abstract (its length drawn from PubMed abstracts'
length distribution, `PUBMED_ABSTRACT_WORDS`), made of sentences drawn from any real abstract;
its title, year and MeSH come from random real documents (the title from one that has a title).
The real documents are kept inside, spread evenly, so BioASQ questions still have their gold to
find among distractors written in the same vocabulary. A synthetic document's vector is the
normalised mean of the real vectors of the abstracts its sentences came from: precomputed, as
ingestion with vectors would be given, without running a model over millions of texts.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infra.search.analysis import analyze
from infra.search.query import Bool, parse_query

PUBMED_ABSTRACT_WORDS = (
    66, 148, 169, 184, 194, 203, 214, 224, 233, 238, 242,
    246, 250, 255, 261, 266, 276, 293, 306, 336, 467,
)  # fmt: skip
"""Words in a PubMed abstract at every fifth percentile, 0 to 100: PubMedQA's 1,000 expert-labelled
abstracts, context and conclusion together (../shared/data/pubmedqa/ori_pqal.json, MIT licence;
mean 240, median 242 words; `python -m lab.bench.synthetic FILE` prints them again). Real
PubMed abstracts, though structured ones of clinical studies. The shared corpus the sentences
come from is mostly BioASQ snippets (median 29 words, mean 48): until 2026-11-27 the synthetic
abstracts took its lengths, a fifth of PubMed's, and every scale figure before then was measured
on that shorter text (docs/measured.md says which)."""
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
        sentences, owners = [], []
        for i, doc in enumerate(self.docs):
            parts = [s for s in _SENTENCE_END.split(doc.get("abstract") or "") if s.strip()]
            sentences += parts
            owners += [i] * len(parts)
        if not sentences:
            raise ValueError("the documents have no abstract text to resample")
        self.sentences = np.array(sentences, dtype=object)
        self.owners = np.array(owners, dtype=np.int64)
        self.words_per_sentence = sum(len(s.split()) for s in sentences) / len(sentences)
        titled = [i for i, doc in enumerate(self.docs) if doc.get("title")]
        self.titled = np.array(titled or range(len(self.docs)), dtype=np.int64)

    def sentence_counts(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Return how many sentences each of `n` synthetic abstracts takes.

        A length in words is drawn from PubMed's distribution (`PUBMED_ABSTRACT_WORDS`, linear
        between its percentiles) and divided by the pool's mean words a sentence.
        """
        words = np.interp(
            rng.random(n), np.linspace(0, 1, len(PUBMED_ABSTRACT_WORDS)), PUBMED_ABSTRACT_WORDS
        )
        return np.maximum(1, np.rint(words / self.words_per_sentence)).astype(np.int64)

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
        lengths = self.sentence_counts(rng, n)
        picks = rng.integers(len(self.sentences), size=int(lengths.sum()))
        titles = self.titled[rng.integers(len(self.titled), size=n)]
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


def postings_share(queries: Sequence[str], doc_freq: Callable[[str], int], n: int) -> dict:
    """Return how much of a corpus of `n` documents each query's terms reach, mean and median.

    A query's share is the sum over its distinct terms (as the index analyses them) of the share
    of documents holding the term: the postings a disjunction of them walks, per document. It is
    what BM25's time grows with, and it says how representative a corpus is of another for the
    same queries: the synthetic corpus is resampled from sentences most of which are BioASQ's
    gold snippets, so the questions' own words are likely denser in it than in PubMed.
    """
    shares = np.array(
        [sum(doc_freq(t) for t in set(query_terms(q))) / n for q in queries], dtype=np.float64
    )
    return {"mean": round(float(shares.mean()), 3), "median": round(float(np.median(shares)), 3)}


def query_terms(query: str) -> list[str]:
    """Return the index terms of a quorum query's words (its operators and fields left out)."""
    words: list[str] = []
    stack = [parse_query(query)]
    while stack:
        node = stack.pop()
        if isinstance(node, Bool):
            stack += [*node.must, *node.should]  # a term it excludes is never scored
        else:
            words.append(node.text)
    return analyze(" ".join(words))


def doc_freqs(docs: Iterable[dict[str, Any]]) -> tuple[Counter[str], int]:
    """Return how many of `docs` hold each term of their title and abstract, and how many."""
    held: Counter[str] = Counter()
    n = 0
    for doc in docs:
        held.update(set(analyze(f"{doc.get('title') or ''} {doc.get('abstract') or ''}")))
        n += 1
    return held, n


def abstract_word_percentiles(pqal: Path) -> list[int]:
    """Return the words in PubMedQA's abstracts (context, conclusion) at each fifth percentile."""
    records = json.loads(pqal.read_text(encoding="utf-8"))
    words = [
        len(" ".join(r["CONTEXTS"]).split()) + len(r["LONG_ANSWER"].split())
        for r in records.values()
    ]
    return np.rint(np.percentile(words, np.arange(0, 101, 5))).astype(int).tolist()


if __name__ == "__main__":
    print(abstract_word_percentiles(Path(sys.argv[1])))
