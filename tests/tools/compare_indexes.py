"""Two kept `bench scale` indexes of one corpus, asked the same questions in turn in one process.

A measurement for issue 31 (a command, not a test). `bench scale` times each index in its own
run; on a shared virtual machine two runs of the same index drifted apart by a third (1 M, one
shard: BM25 top-1000 p50 9.2 ms in the bench's query child, 12.5 ms an hour later), more than
the difference a setting makes. Here both indexes are open at once and every question goes to
each in turn (each first every other question), down BM25 top-1000 and the default path (10,000 → 300), after one untimed pass,
so drift falls on both alike. It also says how much of the first index's top 1,000 the second
keeps (shards score with their own statistics).

    uv run python tests/tools/compare_indexes.py HOME_A HOME_B [--limit 500]

HOME_A and HOME_B are the QUORUM_HOMEs of two `bench scale --sizes N --keep` runs (for instance
with QUORUM_SEARCH__EMBEDDED_SHARDS=1 and =2). One JSON object out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from infra.search.backends import open_backend
from infra.settings import load_settings
from lab.bench.query import TOP_K, default_path
from lab.bench.scale_peers import percentile


def _open(home: Path) -> tuple[Any, Any, dict[str, Any]]:
    job = json.loads((home / "bench" / "scale" / "job-query.json").read_text())
    settings = load_settings(**job["settings"])
    return open_backend(settings, None), settings, job


def _corpus(home: Path) -> tuple[Any, ...]:
    """Return what names the corpus a run wrote: its size, seed, source and model."""
    path = home / "bench" / "scale" / "job-ingest.json"
    if not path.is_file():
        raise SystemExit(f"{home}: no `bench scale --keep` run here ({path} is missing)")
    job = json.loads(path.read_text())
    return job["size"], job["seed"], job["corpus"], job["model"]


def compare(home_a: Path, home_b: Path, limit: int) -> dict[str, Any]:
    """Time both indexes question by question, in turn; return p50/p95 of each path."""
    if _corpus(home_a) != _corpus(home_b):
        raise SystemExit(
            f"{home_a} and {home_b} hold different corpora ({_corpus(home_a)} against "
            f"{_corpus(home_b)}): compare two runs of one --sizes and --seed"
        )
    opened = [_open(home_a), _open(home_b)]
    inputs = np.load(opened[0][2]["queries"], allow_pickle=True)
    queries, vectors = list(inputs["queries"])[:limit], inputs["vectors"][:limit]
    shortlist = max(opened[0][1].rerank.exact_shortlist, TOP_K)
    times: dict[str, list[list[float]]] = {"bm25": [[], []], "default": [[], []]}
    overlap = []
    for timed in (False, True):
        for j, (text, vector) in enumerate(zip(queries, vectors, strict=True)):
            found: list[list[str]] = [[], []]
            for i in (0, 1) if j % 2 == 0 else (1, 0):  # each goes first half the time
                backend = opened[i][0]
                started = time.perf_counter()
                found[i] = backend.search(text, 1000).pmids
                bm25 = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                default_path(backend, text, vector, shortlist)
                default = (time.perf_counter() - started) * 1000
                if timed:
                    times["bm25"][i].append(bm25)
                    times["default"][i].append(default)
            if timed and found[0]:
                overlap.append(len(set(found[0]) & set(found[1])) / len(found[0]))
    return {
        "indexes": [str(home_a), str(home_b)],
        "shards": [backend.shards for backend, _, _ in opened],
        "segments": [backend.segments() for backend, _, _ in opened],
        "questions": len(queries),
        **{
            f"{path}_{stat}_ms": [percentile(each, q) for each in times[path]]
            for path in ("bm25", "default")
            for stat, q in (("p50", 50), ("p95", 95))
        },
        "top1000_kept_by_b": round(float(np.mean(overlap)), 4) if overlap else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("home_a", type=Path)
    parser.add_argument("home_b", type=Path)
    parser.add_argument("--limit", type=int, default=500)
    args = parser.parse_args()
    print(json.dumps(compare(args.home_a, args.home_b, args.limit)))


if __name__ == "__main__":
    main()
