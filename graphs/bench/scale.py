"""`quorum bench scale`: how both engines grow, on synthetic corpora of the sizes asked for.

For each size, a corpus resampled from the real abstracts' sentences (`synthetic.py`, the real
documents inside) is written into each backend twice, without and with precomputed vectors,
and the second index is queried with BioASQ questions. Every measurement runs in a fresh
interpreter (`scale_child.py`) that loads no model, so peak memory is the engine's own.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphs.bench.query import machine
from graphs.bench.scale_child import PROGRESS
from infra.bioasq.formats import Question
from infra.embeddings import HuggingFaceEmbedder, document_text
from infra.errors import UserError
from infra.ingest.corpus import read_jsonl
from infra.ingest.sources import normalize
from infra.search.backends import drop_index
from infra.search.keywords import keyword_query
from infra.search.query import QueryError
from infra.settings import Settings

SHARED_CORPUS = Path(__file__).resolve().parents[3] / "shared/data/corpus/pubmed_docs.jsonl.gz"
SHARED_QUESTIONS = SHARED_CORPUS.parents[1] / "bioasq"
_ENGINE_FIGURES = (
    "vectors_mib",
    "segments",
    "node_heap_used_mib",
    "vector_files_mib",
    "dense_index_s",
    "dense_index_mib",
    "row_codes_mib",
)
IN_MEMORY_MAX = 2_000_000
"""Sizes above which what holds the whole corpus in memory is not run: bm25s (its index takes
2.4 GiB at 1 M documents) and the int8-fidelity check (every float32 vector, 7.3 GiB at 5 M: it
failed there on these machines' 24 GiB)."""
ELASTICSEARCH_UP_TO = 2_000_000
"""Sizes above which Elasticsearch is not loaded, unless asked: at 1 M it took 2.4 GiB of disk
(1.4 GiB of it float32 vectors) and 3.5 minutes to load on these 2 cores (docs/measured.md,
"Scale"), so 10 M would want ~24 GiB and over half an hour; issue 31 asks for it at 1–2 M on the
same report as the embedded engine's curve."""
TEXT_ONLY_UP_TO = 5_000_000
"""Sizes above which no index is built without vectors, unless asked: the second build only
gives the ingestion rate without vectors (at 26 M it was 22 of the run's 87 minutes, within 1%
of the rate with them: docs/measured.md, "Scale")."""
TARGET = 26_000_000
"""The PubMed baseline BioASQ runs over: what the figures are extrapolated to."""


NUMBA_FACTOR = 1.5
"""How much slower than bm25s with numba the embedded engine's BM25 top-1000 may be (issue 30)."""


def default_inputs() -> tuple[Path | None, list[Path]]:
    """Return the shared corpus and BioASQ golden files when `../shared` is beside the checkout."""
    corpus = SHARED_CORPUS if SHARED_CORPUS.exists() else None
    return corpus, sorted(SHARED_QUESTIONS.glob("*_golden.json")) if corpus else []


def bench_scale(
    settings: Settings,
    corpus: Path,
    questions: Sequence[Question],
    sizes: Sequence[int],
    backends: Sequence[str],
    *,
    seed: int = 0,
    keep: bool = False,
    elasticsearch_up_to: int = ELASTICSEARCH_UP_TO,
    text_only_up_to: int = TEXT_ONLY_UP_TO,
) -> dict[str, Any]:
    """Measure every (size, backend); return one JSON-able report.

    Elasticsearch is loaded only up to `elasticsearch_up_to` documents; the sizes above it are
    listed under `not_run`. Above `text_only_up_to` no index is built without vectors: the disk
    without vectors is that of the one index's text files, and the ingestion rate without
    vectors is not measured.
    """
    docs = [normalize(d) for d in read_jsonl(corpus) if isinstance(d, dict)]
    if min(sizes) < len(docs):
        raise UserError(
            f"--sizes {min(sizes):,} is smaller than the {len(docs):,} real documents of "
            f"{corpus}; every size must hold them"
        )
    work = settings.home / "bench" / "scale"
    work.mkdir(parents=True, exist_ok=True)
    embedder = HuggingFaceEmbedder(settings.embeddings)
    vectors = real_vectors_file(work, docs, embedder)
    queries = save_queries(work, docs, questions, embedder)
    report: dict[str, Any] = {
        "real_docs": len(docs),
        "questions": queries["count"],
        "model": embedder.name,
        "seed": seed,
        "machine": machine(),
        "sizes": {},
        "not_run": [],
    }
    (work / REPORT).unlink(missing_ok=True)  # a failure names it: never an earlier run's
    for size in sizes:
        per_backend: dict[str, Any] = {}
        report["sizes"][str(size)] = per_backend
        for backend in backends:
            if backend == "elasticsearch" and size > elasticsearch_up_to:
                why = f"above --elasticsearch-up-to {elasticsearch_up_to:,}"
                report["not_run"].append({"size": size, "backend": backend, "why": why})
                continue
            plain = _settings(settings, backend, f"scale-{size}-plain")
            dense = _settings(settings, backend, f"scale-{size}")
            job = {"corpus": str(corpus), "size": size, "seed": seed, "model": embedder.name}
            without: dict[str, Any] | None = None
            if size <= text_only_up_to:
                without = _child("ingest", work, job | {"settings": _dump(plain)})
                if not keep:
                    drop_index(plain)
            else:
                why = f"above --text-only-up-to {text_only_up_to:,}: disk from the text files"
                skipped = {"size": size, "backend": f"{backend} text-only", "why": why}
                report["not_run"].append(skipped)
            with_vectors = _child(
                "ingest", work, job | {"settings": _dump(dense), "vectors": str(vectors)}
            )
            asked = _child(
                "query", work, {"settings": _dump(dense), "queries": str(queries["path"])}
            )
            if backend == "embedded" and size >= settings.search.dense_ann_rows:
                # the IVF stage at smaller and larger shares, judged against the exact top 100
                asked |= _child(
                    "dense", work, {"settings": _dump(dense), "queries": str(queries["path"])}
                )
            if backend == "embedded" and size <= IN_MEMORY_MAX:
                asked |= _child(
                    "fidelity",
                    work,
                    job
                    | {
                        "settings": _dump(dense),
                        "vectors": str(vectors),
                        "queries": str(queries["path"]),
                    },
                )
            if not keep:
                drop_index(dense)
            peaks = [with_vectors["peak_rss_mib"]] + ([without["peak_rss_mib"]] if without else [])
            per_backend[backend] = {
                "ingest_docs_per_s_without_vectors": without["docs_per_s"] if without else None,
                "ingest_docs_per_s_with_vectors": with_vectors["docs_per_s"],
                "disk_mib_without_vectors": (
                    without["disk_mib"] if without else with_vectors.get("text_mib")
                ),
                "disk_mib_with_vectors": with_vectors["disk_mib"],
                "ingest_peak_rss_mib": max(peaks),
                **{k: v for k, v in with_vectors.items() if k in _ENGINE_FIGURES},
                **asked,
            }
            print(f"{size:,} {backend}: {json.dumps(per_backend[backend])}", file=sys.stderr)
            _save(work, report)
        if "embedded" in backends and size <= IN_MEMORY_MAX:
            job = {"corpus": str(corpus), "size": size, "seed": seed}
            per_backend["bm25s"] = _child("peer", work, job | {"queries": str(queries["path"])})
            print(f"{size:,} bm25s: {json.dumps(per_backend['bm25s'])}", file=sys.stderr)
            _save(work, report)
    report["extrapolated_26m"] = extrapolate(report["sizes"])
    report["targets"] = targets(report["sizes"])
    report["projected_26m"] = project(report["sizes"], settings.search.row_codes_rows)
    _save(work, report)
    return report


REPORT = "report.json"
"""The report as far as it got, in the bench's work folder: rewritten after each measurement, so
a run of hours that fails at its largest size keeps what it measured before."""


def _save(work: Path, report: dict[str, Any]) -> None:
    tmp = work / (REPORT + ".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(work / REPORT)


FULL_SIZE = 5_000_000
"""From this size on a corpus is judged by issue 31's full-size targets, not issue 18's 1 M ones."""


def targets(sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Check the embedded engine against issues 18's, 30's and 31's targets.

    Issue 18, at sizes from 1 M up to `FULL_SIZE`: default path p50 ≤ 30 ms, BM25 top-1000 p50 no
    slower than bm25s's default numpy backend in the same run, opening ≤ 1 s and ≤ 200 MB.
    Issue 30, at every size: BM25 top-1000 p50 within `NUMBA_FACTOR` of bm25s with numba, its
    fastest. Issue 31, from `FULL_SIZE` on: BM25 top-1000 p50 ≤ 20 ms, the default path p50 ≤
    50 ms, the dense stage's p50 ≤ 50 ms, opening ≤ 1 s, the default query path's peak ≤ 8 GiB.
    """
    out: dict[str, Any] = {}
    for size, figures in sizes.items():
        embedded, peer = figures.get("embedded"), figures.get("bm25s") or {}
        if not embedded:
            continue
        bm25 = embedded["bm25_top1000_p50_ms"]
        checks = {}
        if int(size) >= FULL_SIZE:
            checks = {
                "bm25_p50_ms": (bm25, 20.0),
                "default_p50_ms": (embedded["default_10000_to_300_p50_ms"], 50.0),
                "dense_p50_ms": (embedded["dense_top100_p50_ms"], 50.0),
                "open_s": (embedded["open_s"], 1.0),
                # The default configuration's query path (the dense stage is off by default;
                # on, its IVF lists add to the heap: query_peak_rss_mib has both).
                "default_path_peak_rss_mib": (
                    embedded.get("default_path_peak_rss_mib", embedded["query_peak_rss_mib"]),
                    8192.0,
                ),
            }
        elif int(size) >= 1_000_000:
            checks = {
                "default_p50_ms": (embedded["default_10000_to_300_p50_ms"], 30.0),
                "open_s": (embedded["open_s"], 1.0),
                "open_rss_mib": (embedded["open_rss_mib"], 200.0),
            }
            if "bm25s_top1000_p50_ms" in peer:
                checks["bm25_p50_ms_vs_bm25s"] = (bm25, peer["bm25s_top1000_p50_ms"])
        if "bm25s_numba_top1000_p50_ms" in peer:
            limit = round(NUMBA_FACTOR * peer["bm25s_numba_top1000_p50_ms"], 3)
            checks["bm25_p50_ms_vs_bm25s_numba"] = (bm25, limit)
        if checks:
            out[size] = {
                name: {"measured": value, "target": limit, "met": value <= limit}
                for name, (value, limit) in checks.items()
            }
    return out


def extrapolate(sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Scale what grows with the corpus (disk, vectors) linearly to 26 million documents.

    Each engine from the largest size it was measured at (`from_size`; Elasticsearch stops at
    `ELASTICSEARCH_UP_TO`); latencies are left to the curve: they depend on the queries'
    postings, which grow with the corpus but not in proportion. Opening the embedded index maps
    its files and reads none, so its memory is given as measured, not scaled.
    """
    out: dict[str, Any] = {"from_size": int(max(sizes, key=int))}
    engines = dict.fromkeys(b for figures in sizes.values() for b in figures)
    for backend in engines:
        largest = max((size for size in sizes if backend in sizes[size]), key=int)
        figures, factor = sizes[largest][backend], TARGET / int(largest)
        keys = ("disk_mib_with_vectors", "vectors_mib")
        scaled: dict[str, Any] = {
            key.replace("_mib", "_gib"): round(figures[key] * factor / 1024, 1)
            for key in keys
            if key in figures
        }
        if backend == "embedded":
            scaled["open_rss_mib_measured"] = figures.get("open_rss_mib")
        if scaled and int(largest) != out["from_size"]:
            scaled["from_size"] = int(largest)
        if scaled:
            out[backend] = scaled
    return out


CURVE_FROM = 1_000_000
"""Smallest size a latency or memory curve is fitted through: below it fixed costs (opening a
segment, handing 1,000 hits to Python) weigh as much as the postings walked."""
_PROJECTED = {
    "bm25_p50_ms": (("bm25_top1000_p50_ms",), 20.0, False),
    # measured at 26 M the codes moved it by noise (45.7 -> 45.3 ms in one index)
    "default_p50_ms": (("default_10000_to_300_p50_ms",), 50.0, False),
    "dense_p50_ms": (("dense_top100_p50_ms",), 50.0, False),
    # a report from before the default path's own peak was taken has the whole process's
    "default_path_peak_rss_mib": (
        ("default_path_peak_rss_mib", "query_peak_rss_mib"),
        8192.0,
        True,
    ),
}
"""Issue 31's targets that grow with the corpus: the name `targets` gives each, the figures read
(the first present), the target, and whether row codes change it. Opening is left out: it follows
the index's segments, not its documents (from a cold cache 0.35 s for 8-9 segments at 5 and 10 M,
1.77 s for 30 at 26 M in two shards)."""


def project(sizes: dict[str, dict[str, Any]], codes_from: int) -> dict[str, Any]:
    """Project the embedded engine's latencies and memory to 26 M along the measured curve.

    A power law, value = c · size^b, fitted by least squares on the logarithms through every
    size from `CURVE_FROM` up that measured the figure (at least two, all below `TARGET`: a run
    that reached 26 M is judged by `targets` on what it measured). The default path's memory is
    fitted only through sizes that, as 26 M would from `codes_from` rows on, had row codes (at
    26 M they took the query process's peak from 13.5 to 4.6 GiB, reading ~1,270 int8 rows a
    question instead of 9,760): a curve across the change would not project it. Each figure
    gives its exponent (1 grows with the corpus, 0 not at all), the sizes fitted and the value at
    `TARGET` against issue 31's target; one that cannot be fitted says why. A projection, not a
    measurement: the machine, the shard count and the index's segments move the curve.
    """
    embedded = {
        int(size): figures["embedded"]
        for size, figures in sizes.items()
        if "embedded" in figures and int(size) >= CURVE_FROM
    }
    if not embedded or max(embedded) >= TARGET:
        return {}
    out: dict[str, Any] = {}
    with_codes = codes_from <= TARGET
    for name, (keys, target, codes_matter) in _PROJECTED.items():
        points = []
        for size, figures in sorted(embedded.items()):
            value = next((figures[key] for key in keys if figures.get(key)), None)
            had_codes = bool(figures.get("row_codes_mib"))
            if value is None or value <= 0 or (codes_matter and had_codes != with_codes):
                continue
            points.append((size, float(value)))
        if len(points) < 2:
            regime = " with row codes (as 26 M would have)" if codes_matter and with_codes else ""
            out[name] = {
                "not_projected": f"{len(points)} size(s) from 1 M measured it{regime}: a curve "
                "needs two"
            }
            continue
        logs = np.log([[size, value] for size, value in points])
        exponent, intercept = np.polyfit(logs[:, 0], logs[:, 1], 1)
        value = float(np.exp(intercept) * TARGET**exponent)
        out[name] = {
            "sizes": [size for size, _ in points],
            "exponent": round(float(exponent), 3),
            "at_26m": round(value, 1),
            "target": target,
            "met": value <= target,
        }
    return out


def real_vectors_file(work: Path, docs: list[dict[str, Any]], embedder: Any) -> Path:
    """Embed the real documents once (cached by model and corpus); return the .npy path."""
    digest = hashlib.sha256("".join(d["pmid"] for d in docs).encode()).hexdigest()[:16]
    path = work / f"vectors-{embedder.name}-{digest}.npy"
    if not path.exists():
        print(f"embedding the {len(docs):,} real documents once ({path})", file=sys.stderr)
        texts = [document_text(d["title"], d["abstract"]) for d in docs]
        vectors = np.concatenate(
            [embedder.embed_documents(texts[i : i + 1024]) for i in range(0, len(texts), 1024)]
        )
        np.save(path, vectors.astype(np.float32))
    return path


def save_queries(
    work: Path,
    docs: list[dict[str, Any]],
    questions: Sequence[Question],
    embedder: Any,
    name: str = "queries.npz",
) -> dict[str, Any]:
    """Save the questions' keyword queries, vectors and gold held by the corpus; return where.

    Each bench saves under its own `name`, so one's --limit never changes what a query child
    of another, run again by hand on the same home, reads.
    """
    held = {d["pmid"] for d in docs}
    kept, texts, gold = [], [], []
    for question in questions:
        wanted = sorted(set(question.documents) & held)
        try:
            query = keyword_query(question.body)
        except QueryError:
            continue
        if wanted:
            kept.append(question.body)
            texts.append(query)
            gold.append(wanted)
    if not kept:
        raise UserError("no question has a gold document in the corpus: nothing to time")
    path = work / name
    np.savez(
        path,
        queries=np.array(texts, dtype=object),
        vectors=embedder.embed_documents(kept),
        gold=np.array(gold, dtype=object),
    )
    return {"path": path, "count": len(kept)}


def _child(kind: str, work: Path, job: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter, passing its progress lines on to stderr."""
    path = work / f"job-{kind}.json"
    path.write_text(json.dumps(job))
    started = time.perf_counter()
    tail: deque[str] = deque(maxlen=50)
    with (work / f"job-{kind}.out").open("w+") as stdout:
        child = subprocess.Popen(
            [sys.executable, "-m", "graphs.bench.scale_child", kind, str(path)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        for line in child.stderr:
            if line.startswith(PROGRESS):
                print(f"{kind} {line.removeprefix(PROGRESS)}", end="", file=sys.stderr)
            else:
                tail.append(line)
        child.wait()
        stdout.seek(0)
        printed = stdout.read()
    if child.returncode != 0:
        kept = work / REPORT
        before = f" (what was measured before it: {kept})" if kept.exists() else ""
        raise RuntimeError(f"bench scale {kind} failed{before}: {''.join(tail).strip()[-2000:]}")
    figures = json.loads(printed.strip().splitlines()[-1])
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    return figures


def _settings(settings: Settings, backend: str, index: str) -> Settings:
    changed = settings.model_copy(
        update={"search": settings.search.model_copy(update={"backend": backend, "index": index})}
    )
    drop_index(changed)
    return changed


def _dump(settings: Settings) -> dict[str, Any]:
    """Return what a child needs to rebuild these settings (home and search)."""
    return {"home": str(settings.home), "search": settings.search.model_dump(mode="json")}
