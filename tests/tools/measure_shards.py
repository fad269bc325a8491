"""Would splitting the embedded index into shards searched in parallel bring BM25 under 20 ms?

A measurement for issue 31 (a command, not a test): tantivy-py searches one index's segments in
the calling thread (it exposes no multi-threaded executor) but releases the GIL while it does, so
an index split into shards could be searched by one thread a shard. This writes `bench scale`'s
synthetic corpus again (the same seed, so the same documents) into `--shards` tantivy indexes,
document i into shard i mod shards, each by its own process, then times BM25 top-1000 over the
shards — one thread a shard, hits merged by score — against the single index `bench scale
--keep` left, on the same questions, and says how much of the single index's top 1,000 and top
10 the merged lists keep (each shard scores with its own statistics, as Elasticsearch's shards
do by default, so the two rankings differ a little).

    uv run python tests/tools/measure_shards.py build --job HOME/bench/scale/job-ingest.json \\
        --out DIR --shards 2
    uv run python tests/tools/measure_shards.py query --job HOME/bench/scale/job-query.json \\
        --out DIR --shards 2 [--limit 500]

`build` writes text only (no vectors: BM25 reads none). One JSON object out of each step.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_layout import decode
from infra.search.embedded_store import EmbeddedWriter
from infra.settings import load_settings
from lab.bench.query import peak_rss_mib
from lab.bench.recall import tie_aware_recall
from lab.bench.scale_child import COMMIT_EVERY
from lab.bench.scale_peers import real_docs
from lab.bench.synthetic import SentencePool

LIMIT = 1000


def build_shard(job: dict[str, Any], out: Path, shard: int, shards: int) -> dict[str, Any]:
    """Write every `shards`-th synthetic document, from `shard`, into the shard's index."""
    vectors = np.load(job["vectors"]) if job.get("vectors") else None
    pool = SentencePool(real_docs(job), vectors)  # vectors drawn too: the same random stream
    writer = EmbeddedWriter(out / f"shard-{shard}")
    started, seen, written, since = time.perf_counter(), 0, 0, 0
    for batch in pool.batches(job["size"], seed=job["seed"]):
        mine = batch.docs[(shard - seen) % shards :: shards]
        seen += len(batch.docs)
        writer.upsert(mine, None)
        written += len(mine)
        since += len(mine)
        if since >= COMMIT_EVERY:
            writer.commit()
            since = 0
    writer.close()
    return {"shard": shard, "docs": written, "seconds": round(time.perf_counter() - started, 1)}


def build(job: dict[str, Any], out: Path, shards: int) -> dict[str, Any]:
    """Write the shards side by side, a process each."""
    out.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(shards) as pool:
        done = list(
            pool.map(build_shard, [job] * shards, [out] * shards, range(shards), [shards] * shards)
        )
    return {"shards": done}


def query(job: dict[str, Any], out: Path, shards: int, limit: int) -> dict[str, Any]:
    """Time the single index and the shards on the same questions; compare their top 1,000."""
    settings = load_settings(**job["settings"])
    single = EmbeddedIndex(settings.home / "indexes" / settings.search.index)
    parts = [EmbeddedIndex(out / f"shard-{s}") for s in range(shards)]
    queries = list(np.load(job["queries"], allow_pickle=True)["queries"])[:limit]
    pool = ThreadPoolExecutor(shards)

    def merged(text: str) -> tuple[list[str], np.ndarray]:
        results = list(pool.map(lambda part: part.search(text, LIMIT), parts))
        pmids = [p for r in results for p in r.pmids]
        scores = np.concatenate([r.scores for r in results]) if pmids else np.zeros(0)
        order = np.argsort(-scores, kind="stable")[:LIMIT]
        return [pmids[i] for i in order], scores[order]

    for text in queries[:20]:  # warm both sides' term dictionaries alike
        single.search(text, LIMIT)
        merged(text)
    timings: dict[str, list[float]] = {"single": [], "shards": []}
    keep_1000, keep_10 = [], []
    for text in queries:
        started = time.perf_counter()
        one = single.search(text, LIMIT)
        timings["single"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        many, _ = merged(text)
        timings["shards"].append((time.perf_counter() - started) * 1000)
        if one.pmids:
            rescored = _single_scores(single, text, many)
            keep_1000.append(_kept(one.scores, rescored, LIMIT))
            keep_10.append(_kept(one.scores, rescored[:10], 10))
    return {
        "questions": len(queries),
        "docs": single.count(),
        "shards": shards,
        "single_segments": single.segments(),
        "shard_segments": [p.segments() for p in parts],
        **{
            f"{side}_top1000_p{q}_ms": round(float(np.percentile(t, q)), 1)
            for side, t in timings.items()
            for q in (50, 95)
        },
        "top1000_kept": round(float(np.mean(keep_1000)), 4),
        "top10_kept": round(float(np.mean(keep_10)), 4),
        "peak_rss_mib": peak_rss_mib(),
    }


def _single_scores(single: EmbeddedIndex, text: str, pmids: list[str]) -> np.ndarray:
    """Return the single index's own BM25 scores of `pmids` (in their order)."""
    if not pmids:
        return np.zeros(0, np.float32)
    only = tantivy.Query.term_set_query(single._schema, "pmid", pmids)
    query = tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Must, single.compile(text)),
            (tantivy.Occur.Must, tantivy.Query.boost_query(only, 0.0)),
        ]
    )
    hits = single._searcher.search(query, len(pmids)).hits
    rows = list(single._searcher.fast_field_values("row", [a for _, a in hits]))
    score = dict(
        zip(decode(single._pmids[np.array(rows, np.int64)]), (s for s, _ in hits), strict=True)
    )
    return np.array([score.get(p, 0.0) for p in pmids], np.float32)


def _kept(single: np.ndarray, rescored: np.ndarray, k: int) -> float:
    """Share of the shards' top k that the single index scores at least as high as its own kth.

    The synthetic documents are made of shared sentences, so scores tie often: which of the tied
    documents fill a top k is arbitrary in either engine, and any of them belongs there.
    """
    k = min(k, len(single))
    return tie_aware_recall(rescored[:k], float(single[k - 1]), k) if k else 1.0


def step_parser(doc: str) -> argparse.ArgumentParser:
    """Return the arguments a build-then-query measurement takes: the step, a bench job, a folder."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("step", choices=["build", "query"])
    parser.add_argument("--job", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=500)
    return parser


def main() -> int:
    parser = step_parser(__doc__)
    parser.add_argument("--shards", type=int, default=2)
    args = parser.parse_args()
    job = json.loads(args.job.read_text())
    if args.step == "build":
        report = build(job, args.out, args.shards)
    else:
        report = query(job, args.out, args.shards, args.limit)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
