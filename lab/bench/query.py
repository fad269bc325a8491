"""The query half of the retrieval benchmark, light enough for a child process to import.

Only numpy and the search engines: the embedded engine's memory is measured in a process
that never loads torch or a model.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infra.search.fusion import fuse
from infra.search.shortlist import fusion_cosines
from infra.settings.retrieval import RerankSettings

CANDIDATES = 10_000
TOP_K = 300
SHORTLIST = max(RerankSettings().exact_shortlist, TOP_K)
"""Candidates scored exactly where the index has row codes, as `rerank` scores them."""


def query_latency(backend: Any, queries: Sequence[str], vectors: np.ndarray) -> dict[str, float]:
    """Time search(10,000) + engine cosine + fusion + top 300 for each query, in ms."""
    times, depth = [], []
    for query, vector in zip(queries, vectors, strict=True):
        started = time.perf_counter()
        _, found = default_path(backend, query, vector)
        times.append((time.perf_counter() - started) * 1000)
        depth.append(found)
    return {
        "p50_ms": round(float(np.percentile(times, 50)), 2),
        "p95_ms": round(float(np.percentile(times, 95)), 2),
        "mean_candidates": round(float(np.mean(depth)), 1),
    }


def default_path(
    backend: Any, query: str, vector: np.ndarray, shortlist: int = SHORTLIST
) -> tuple[list[str], int]:
    """Run the default query path: BM25's 10,000, the engine's cosines, fusion, the top 300.

    Returns the top 300 PMIDs, best first, and how many candidates BM25 found.
    """
    result = backend.search(query, CANDIDATES)
    pmids, bm25 = result.pmids, result.scores
    cosine, _ = fusion_cosines(
        backend,
        pmids,
        bm25,
        vector,
        method="interpolate",
        alpha=0.6,
        rrf_k=60,
        shortlist=shortlist,
        keep=TOP_K,
    )
    scores = fuse(bm25, cosine, "interpolate", 0.6, 60)
    return [pmids[i] for i in np.argsort(-scores, kind="stable")[:TOP_K]], len(pmids)


def peak_rss_mib() -> float:
    """Return peak resident memory in MiB (VmHWM: unlike ru_maxrss, not inherited at fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def resident_mib() -> dict[str, float]:
    """Return resident memory now, split: the process's own (anonymous) and mapped files' pages.

    Mapped pages (the index's vectors and postings) are the kernel's page cache, shared and given
    back under pressure; the anonymous part is what the process itself holds.
    """
    wanted = {"RssAnon:": "rss_anon_mib", "RssFile:": "rss_file_mib"}
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(maxsplit=1)[0] if line else ""
        if key in wanted:
            found[wanted[key]] = round(int(line.split()[1]) / 1024, 1)
    return found


def evict(folder: Path) -> float | None:
    """Drop every file under `folder` from the page cache; return the MiB that were on disk.

    posix_fadvise(DONTNEED) needs no privilege, unlike writing /proc/sys/vm/drop_caches; pages
    still dirty are written first (fdatasync), as DONTNEED drops only clean ones. None where the
    call does not exist (macOS): nothing evicted.
    """
    if not hasattr(os, "posix_fadvise"):
        return None
    total = 0
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return round(total / 2**20, 1)


def machine() -> dict[str, Any]:
    """Return what the figures were measured on: CPU, widest vector extension, cores, memory.

    The same command ran at half the speed on a 2-core AMD EPYC with AVX2 as on the machine of
    the earlier runs (docs/measured.md, "Scale"): figures compare only with the machine named.
    """
    cpu, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and cpu == "unknown":
                    cpu = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:  # not Linux
        pass
    simd = next((f for f in ("avx512f", "avx2", "neon") if f in flags), None)
    memory = round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1)
    return {"cpu": cpu, "simd": simd, "cores": os.cpu_count(), "memory_gib": memory}


def main() -> None:
    """Time the embedded engine's query path from inputs in a .npz file; print JSON figures."""
    from infra.search.embedded import EmbeddedIndex

    index_dir, inputs = sys.argv[1], np.load(sys.argv[2], allow_pickle=True)
    figures = query_latency(
        EmbeddedIndex(Path(index_dir)), list(inputs["queries"]), inputs["vectors"]
    )
    figures["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
