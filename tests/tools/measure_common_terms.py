"""Would scoring the questions' common words only where a rarer word matches bring BM25 to target?

A measurement for issue 31 (a command, not a test). At PubMed's length 95.5% of the postings the
500 keyword queries walk at 5 M belong to words in more than 5% of the documents ("changes",
"function", "cause"), which weigh little in BM25. Lucene's CommonTermsQuery made them optional:
a document must hold one of the rarer words, and the common ones add to its score only there
(tantivy's required-optional scorer seeks their postings to those documents instead of walking
them). The score of a document kept is BM25's own; what is lost is every document holding only
common words, so the figure beside the time is the share of the exact top k kept. A query whose
words are all common or all rare, or whose rarer words hold fewer than k documents, runs whole.
Both queries are asked one after the other a question, in one thread, on a `bench scale` index:

    uv run python tests/tools/measure_common_terms.py --job HOME/bench/scale/job-query.json \\
        [--k 1000] [--cuts 0.01,0.05,0.1] [--limit 200]

One JSON object out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.embedded import EmbeddedIndex
from infra.settings import load_settings
from lab.bench.synthetic import query_terms


def measure(index: EmbeddedIndex, queries: list[str], k: int, cuts: list[float]) -> dict:
    """Time the exact disjunction and each cut's approximation; return p50s and the overlap."""
    searcher, n, should = index._searcher, index.count(), tantivy.Occur.Should

    def top(query: tantivy.Query) -> set[tuple[int, int]]:
        found = searcher.search(query, k, count=True)
        return {(hit[1].segment_ord, hit[1].doc) for hit in found.hits}

    exact_ms: list[float] = []
    cut: dict[float, dict[str, Any]] = {c: {"ms": [], "kept": [], "whole": 0} for c in cuts}
    for text in queries:
        terms = {t: q for t in sorted(set(query_terms(text))) if (q := index.compile(t))}
        if not terms:
            continue
        freq = {t: index.doc_freq(t) for t in terms}
        whole = tantivy.Query.boolean_query([(should, q) for q in terms.values()])
        started = time.perf_counter()
        exact = top(whole)
        exact_ms.append((time.perf_counter() - started) * 1000)
        for c, figures in cut.items():
            rare = [t for t in terms if freq[t] <= c * n]
            common = [t for t in terms if freq[t] > c * n]
            started = time.perf_counter()
            if rare and common and sum(freq[t] for t in rare) >= k:
                required = tantivy.Query.boolean_query([(should, terms[t]) for t in rare])
                clauses = [(tantivy.Occur.Must, required)] + [(should, terms[t]) for t in common]
                got = top(tantivy.Query.boolean_query(clauses))
            else:
                figures["whole"] += 1
                got = top(whole)
            figures["ms"].append((time.perf_counter() - started) * 1000)
            figures["kept"].append(len(got & exact) / max(1, len(exact)))
    return {
        "docs": n,
        "k": k,
        "questions": len(exact_ms),
        "exact_p50_ms": round(float(np.median(exact_ms)), 2),
        "cuts": {
            str(c): {
                "p50_ms": round(float(np.median(f["ms"])), 2),
                "kept_mean": round(float(np.mean(f["kept"])), 4),
                "kept_p5": round(float(np.percentile(f["kept"], 5)), 3),
                "asked_whole": f["whole"],
            }
            for c, f in cut.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", type=Path, required=True)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--cuts", default="0.01,0.05,0.1")
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    job = json.loads(args.job.read_text())
    settings = load_settings(**job["settings"])
    queries = list(np.load(job["queries"], allow_pickle=True)["queries"])[: args.limit]
    cuts = [float(c) for c in args.cuts.split(",")]
    report = measure(EmbeddedIndex(settings.index_dir), queries, args.k, cuts)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
