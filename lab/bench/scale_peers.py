"""The jobs of `quorum bench scale` that hold a whole corpus in memory (run up to 1 M documents).

`peer` times bm25s's top-1000 on the same corpus and queries as the embedded engine; `fidelity`
holds the embedded engine's int8 vectors against the float32 ones it was given. Each runs in a
fresh interpreter through scale_child.py's `main`, as the other jobs do.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from infra.ingest.sources import normalize
from infra.search.backends import open_backend
from infra.search.corpus import read_jsonl
from infra.search.fusion import fuse
from infra.settings import load_settings
from lab.bench.query import peak_rss_mib
from lab.bench.synthetic import SentencePool

FIDELITY_QUESTIONS = 100
"""Questions the int8-against-float32 comparison takes (each scans every vector twice)."""


def peer(job: dict[str, Any]) -> dict[str, Any]:
    """Index the same synthetic corpus with bm25s (in memory) and time its top-1000.

    The peer the embedded engine's BM25 is held to: the same documents (title + abstract), the
    same keyword queries as plain words, one thread, tokenizing the query inside the timing as
    tantivy parses it inside its own.
    """
    import bm25s

    docs = real_docs(job)
    texts, pmids = [], []
    for batch in SentencePool(docs).batches(job["size"], seed=job["seed"]):
        texts += [f"{d['title']} {d['abstract']}" for d in batch.docs]
        pmids += [d["pmid"] for d in batch.docs]
    started = time.perf_counter()
    tokenizer = bm25s.tokenization.Tokenizer(stopwords="en")
    ids = tokenizer.tokenize(texts, show_progress=False, return_as="ids")
    del texts
    inputs = np.load(job["queries"], allow_pickle=True)
    gold = [set(g) for g in inputs["gold"]]
    words = [
        " ".join(w for w in _WORD.findall(text) if w not in ("AND", "OR", "NOT"))
        for text in inputs["queries"]
    ]
    figures: dict[str, Any] = {}
    # Its default backend (numpy: what `pip install bm25s` gives) and its fastest (numba).
    for backend, prefix in (("numpy", "bm25s"), ("numba", "bm25s_numba")):
        began = time.perf_counter()
        retriever = bm25s.BM25(backend=backend)
        retriever.index((ids, tokenizer.get_vocab_dict()), show_progress=False)
        indexed = time.perf_counter() - began + (began - started if backend == "numpy" else 0)
        times, recall = [], []
        for text, wanted in zip(words, gold, strict=True):
            began = time.perf_counter()
            query = tokenizer.tokenize([text], update_vocab=False, show_progress=False)
            rows, _ = retriever.retrieve(query, k=1000, show_progress=False, n_threads=1)
            times.append((time.perf_counter() - began) * 1000)
            recall.append(len({pmids[r] for r in rows[0]} & wanted) / len(wanted))
        figures |= {
            f"{prefix}_index_s": round(indexed, 1),
            f"{prefix}_top1000_p50_ms": percentile(times, 50),
            f"{prefix}_top1000_p95_ms": percentile(times, 95),
            f"{prefix}_recall_at_1000": round(float(np.mean(recall)), 3),
        }
        del retriever
    return figures | {"bm25s_peak_rss_mib": peak_rss_mib()}


_WORD = re.compile(r"\w+")


def fidelity(job: dict[str, Any]) -> dict[str, Any]:
    """Compare the embedded engine's int8 vectors with the float32 vectors they were given.

    The synthetic corpus is drawn again (same size and seed: the same documents and vectors);
    per question, the default path's fused top 10 and the dense stage's top 100 are computed
    from the stored int8 vectors and from float32, and their overlap reported.
    """
    settings = load_settings(**job["settings"])
    docs = real_docs(job)
    pool = SentencePool(docs, np.load(job["vectors"]))
    parts, rows = [], {}
    for batch in pool.batches(job["size"], seed=job["seed"]):
        rows |= {d["pmid"]: len(rows) + k for k, d in enumerate(batch.docs)}
        parts.append(batch.vectors)
    exact = np.concatenate(parts).astype(np.float32)
    backend = open_backend(settings, None)
    # int8 against float32 alone: the exact scan, not the IVF index's approximation of it.
    backend.dense_stage(ann_rows=len(exact) + 1, share=1.0)
    inputs = np.load(job["queries"], allow_pickle=True)
    fused, dense, error, recall = [], [], [], {"int8": [], "float32": []}
    questions = zip(inputs["queries"], inputs["vectors"], inputs["gold"], strict=True)
    for text, vector, gold in list(questions)[:FIDELITY_QUESTIONS]:
        result = backend.search(text, 10_000)
        stored = backend.similarities(result.pmids, vector)
        true = exact[[rows[p] for p in result.pmids]] @ vector
        error.append(float(np.abs(stored - true).max()) if len(true) else 0.0)
        top = {}
        for name, cosine in (("int8", stored), ("float32", true)):
            order = np.argsort(-fuse(result.scores, cosine, "interpolate", 0.6, 60))[:10]
            top[name] = {result.pmids[i] for i in order}
            recall[name].append(len(top[name] & set(gold)) / len(gold))
        fused.append(len(top["int8"] & top["float32"]) / max(1, len(top["float32"])))
        truth = set(np.argsort(-(exact @ vector))[:100].tolist())
        found = {rows[p] for p, _ in backend.nearest(vector, 100)}
        dense.append(len(found & truth) / 100)
    # Synthetic documents share their sentences' vectors, so their cosines nearly tie: the
    # overlap of two top 10s measures those ties; recall of the gold is what a user sees.
    return {
        "int8_recall_at_10_fused": round(float(np.mean(recall["int8"])), 4),
        "float32_recall_at_10_fused": round(float(np.mean(recall["float32"])), 4),
        "int8_fused_top10_overlap": round(float(np.mean(fused)), 4),
        "int8_dense_top100_recall": round(float(np.mean(dense)), 4),
        "int8_max_cosine_error": round(float(np.max(error)), 5),
    }


def real_docs(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the real documents every synthetic corpus of the job is resampled from."""
    return [normalize(d) for d in read_jsonl(Path(job["corpus"])) if isinstance(d, dict)]


def percentile(times: list[float], q: int) -> float:
    """Return the q-th percentile of the times, in milliseconds to two decimals."""
    return round(float(np.percentile(times, q)), 2)
