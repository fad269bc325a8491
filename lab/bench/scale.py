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

from infra.bioasq.formats import Question
from infra.embeddings import HuggingFaceEmbedder, document_text
from infra.errors import UserError
from infra.ingest.sources import normalize
from infra.search.backends import drop_index
from infra.search.corpus import read_jsonl
from infra.search.keywords import keyword_query
from infra.search.query import QueryError
from infra.settings import Settings
from lab.bench.query import machine
from lab.bench.scale_child import PROGRESS
from lab.bench.scale_report import extrapolate, project, targets
from lab.bench.synthetic import doc_freqs, postings_share
from lab.shared_data import BIOASQ_GOLDEN, CORPUS

SHARED_CORPUS = CORPUS
SHARED_QUESTIONS = BIOASQ_GOLDEN
_ENGINE_FIGURES = (
    "vectors_mib",
    "segments",
    "node_heap_used_mib",
    "vector_files_mib",
    "dense_index_s",
    "dense_index_mib",
    "row_codes_mib",
)
IN_MEMORY_MAX = 1_000_000
"""Sizes above which what holds the whole corpus in memory is not run: bm25s (its run peaked at
9.8 GiB at 1 M documents of PubMed's length, 2.4 GiB at the earlier fifth of it: 2 M would
take ~20 of these machines' 24 GiB) and the int8-fidelity check (every float32 vector, 7.3 GiB
at 5 M: it failed there)."""
ELASTICSEARCH_UP_TO = 2_000_000
"""Sizes above which Elasticsearch is not loaded, unless asked: at 1 M it took 2.4 GiB of disk
(1.4 GiB of it float32 vectors) and 3.5 minutes to load on these 2 cores (docs/measured.md,
"Scale"), so 10 M would want ~24 GiB and over half an hour; issue 31 asks for it at 1–2 M on the
same report as the embedded engine's curve."""
TEXT_ONLY_UP_TO = 5_000_000
"""Sizes above which no index is built without vectors, unless asked: the second build only
gives the ingestion rate without vectors (at 26 M it was 22 of the run's 87 minutes, within 1%
of the rate with them: docs/measured.md, "Scale")."""


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
    raw = [d for d in read_jsonl(corpus) if isinstance(d, dict)]
    docs = [normalize(d) for d in raw]
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
        "query_postings_share_real_abstracts": reference_share(raw, queries["path"]),
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


REFERENCE_SOURCE = "pubmedqa"
"""The real documents that are whole PubMed abstracts (PubMedQA's, in the shared corpus; the rest
are BioASQ snippets): what the synthetic corpus's query postings are read against."""


def reference_share(raw: list[dict[str, Any]], queries: Path) -> dict[str, Any] | None:
    """Return how much of the whole real abstracts the questions' terms reach (`postings_share`).

    None for a corpus without them. They are clinical studies, so the questions' molecular words
    are likely rarer in them than in PubMed: a bound from below, as the synthetic corpus is
    likely one from above.
    """
    held, n = doc_freqs(d for d in raw if d.get("source") == REFERENCE_SOURCE)
    if not n:
        return None
    texts = list(np.load(queries, allow_pickle=True)["queries"])
    return {"docs": n, **postings_share(texts, held.__getitem__, n)}


REPORT = "report.json"
"""The report as far as it got, in the bench's work folder: rewritten after each measurement, so
a run of hours that fails at its largest size keeps what it measured before."""


def _save(work: Path, report: dict[str, Any]) -> None:
    tmp = work / (REPORT + ".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(work / REPORT)


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
            [sys.executable, "-m", "lab.bench.scale_child", kind, str(path)],
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
