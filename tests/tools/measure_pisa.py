"""Would PISA's dynamic pruning bring BM25's top 1,000 under 20 ms, where tantivy walks the postings?

A measurement for issue 31 (a command, not a test; PISA is not a dependency of quorum: run it
with `uv run --with pyterrier-pisa`). tantivy-py scores every posting of a wide disjunction (its
block-WAND gave 15% at 5 M, measured 2026-11-27), so BM25's time grows with the corpus. PISA
(pisa-engine, through terrierteam's pyterrier-pisa) compresses its postings in blocks with their
maximum scores and skips what cannot reach the top k. This writes `bench scale`'s synthetic
corpus again (the same seed, so the same documents, in the same rows) into a PISA index of the
terms quorum's index holds (tantivy's en_stem analysis run here, PISA's own stemmer and stopwords
off), then asks both the questions' keyword queries, one engine after the other a question,
each in one thread, at BM25's k1 = 1.2 and b = 0.75 (tantivy's), and says how much of tantivy's
top k PISA's holds (by tantivy's own scores: the synthetic documents tie often). The two BM25s are
not the same: PISA's idf is Robertson's, log((N - df + 0.5) / (df + 0.5)) floored near zero, where
tantivy's (Lucene's) adds 1 inside the log, so a term in over half the documents scores nothing in
PISA — its ranking differs there, and its pruning has those terms for free. A like-for-like
figure needs tantivy's scores precomputed as PISA impacts (its `quantized` scorer).

    uv run --with pyterrier-pisa python tests/tools/measure_pisa.py build \\
        --job HOME/bench/scale/job-ingest.json --out DIR
    uv run --with pyterrier-pisa python tests/tools/measure_pisa.py query \\
        --job HOME/bench/scale/job-query.json --out DIR [--limit 500]

One JSON object out of each step.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from infra.search.analysis import analyze
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_layout import decode
from infra.settings import load_settings
from lab.bench.query import peak_rss_mib
from lab.bench.scale_peers import real_docs
from lab.bench.synthetic import SentencePool, query_terms

sys.path.insert(0, str(Path(__file__).parent))
from measure_shards import _kept, _single_scores, step_parser

ALGORITHMS = ("block_max_maxscore", "block_max_wand")
"""PISA's query algorithms timed: its two block-max ones (at 1 M, maxscore without blocks was
slower than block-max MaxScore, and exhaustive ranked_or slower than tantivy)."""
DEPTHS = (1000, 10_000)
"""BM25's top 1,000 (issue 31's figure) and the default path's 10,000 candidates."""


def _docs(job: dict[str, Any]) -> Iterator[dict[str, str]]:
    pool = SentencePool(real_docs(job))
    row = 0
    for batch in pool.batches(job["size"], seed=job["seed"]):
        for doc in batch.docs:
            text = " ".join(analyze(f"{doc['title']} {doc['abstract']}"))
            yield {"docno": str(row), "text": text}
            row += 1


def build(job: dict[str, Any], out: Path) -> dict[str, Any]:
    """Write the corpus's analysed terms into a PISA index at `out`, two threads."""
    import pyterrier_pisa as pisa

    started = time.perf_counter()
    index = pisa.PisaIndex(
        str(out), text_field="text", stemmer="none", stops="none", threads=2, overwrite=True
    )
    index.index(_docs(job))
    return {
        "docs": job["size"],
        "build_s": round(time.perf_counter() - started, 1),
        "disk_mib": round(sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20, 1),
        "peak_rss_mib": peak_rss_mib(),
    }


def query(job: dict[str, Any], out: Path, limit: int) -> dict[str, Any]:
    """Time tantivy and PISA on the same questions; say how much of tantivy's top k PISA finds."""
    import pyterrier_pisa as pisa

    settings = load_settings(**job["settings"])
    single = EmbeddedIndex(settings.home / "indexes" / settings.search.index)
    texts = list(np.load(job["queries"], allow_pickle=True)["queries"])[:limit]
    words = [" ".join(query_terms(t)) for t in texts]
    index = pisa.PisaIndex(str(out))
    report: dict[str, Any] = {"questions": len(texts), "docs": single.count()}
    for depth in DEPTHS:
        contexts = {}
        for algorithm in ALGORITHMS:  # the first use compresses the index for the scorer
            started = time.perf_counter()
            contexts[algorithm] = index.bm25(
                k1=1.2, b=0.75, num_results=depth, threads=1, query_algorithm=algorithm
            )._ctxt
            report[f"pisa_{algorithm}_open_s"] = round(time.perf_counter() - started, 3)
        for text, plain in list(zip(texts, words, strict=True))[:20]:  # warm both alike
            single.search(text, depth)
            for algorithm, context in contexts.items():
                _ask(context, algorithm, plain, depth)
        timings: dict[str, list[float]] = {"tantivy": [], **{a: [] for a in ALGORITHMS}}
        kept_k, kept_10 = [], []
        for text, plain in zip(texts, words, strict=True):
            started = time.perf_counter()
            one = single.search(text, depth)
            timings["tantivy"].append((time.perf_counter() - started) * 1000)
            for algorithm, context in contexts.items():
                started = time.perf_counter()
                rows = _ask(context, algorithm, plain, depth)
                timings[algorithm].append((time.perf_counter() - started) * 1000)
            if one.pmids and depth == DEPTHS[0]:
                pmids = decode(single._pmids[np.array(rows, np.int64)]) if rows else []
                rescored = _single_scores(single, text, pmids)
                kept_k.append(_kept(one.scores, rescored, depth))
                kept_10.append(_kept(one.scores, rescored[:10], 10))
        for side, times in timings.items():
            for q in (50, 95):
                report[f"{side}_top{depth}_p{q}_ms"] = round(float(np.percentile(times, q)), 2)
        if kept_k:
            report[f"pisa_top{depth}_kept"] = round(float(np.mean(kept_k)), 4)
            report["pisa_top10_kept"] = round(float(np.mean(kept_10)), 4)
    report["tantivy_segments"] = single.segments()
    report["peak_rss_mib"] = peak_rss_mib()
    return report


def _ask(context: Any, algorithm: str, text: str, depth: int) -> list[int]:
    """Return PISA's top `depth` rows for `text`, best first (its docnos are the rows)."""
    from pyterrier_pisa import _pisathon

    ids = np.empty(depth, object)
    n = _pisathon.retrieve(
        context, algorithm, [(0, text)], k=depth, threads=1, query_weighted=0, pretokenised=False,
        result_qidxs=np.empty(depth, np.int32), result_docnos=ids,
        result_ranks=np.empty(depth, np.int32), result_scores=np.empty(depth, np.float32),
    )  # fmt: skip
    return [int(i) for i in ids[:n]]


def main() -> int:
    args = step_parser(__doc__).parse_args()
    job = json.loads(args.job.read_text())
    report = build(job, args.out) if args.step == "build" else query(job, args.out, args.limit)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
