"""`quorum bench embed`: how fast `quorum embed`'s encoder turns abstracts into vectors.

Real PubMed abstracts (a .jsonl(.gz) corpus, cycled to the size asked for) go through the
function `quorum embed` uses, `infra.corpus_encoder.encode_corpus`, on the device asked for, once
for each worker count given (0: sentence-transformers' own `encode`, no tokenizing workers), each
after a warm-up batch. Reported: docs/s, the hours 26 M abstracts would take (PubMed's
abstracts, issue 31), tokens per text after the model's truncation, and peak memory. Writing the
vectors into an index is timed only with `--end-to-end`: what `quorum index --no-embeddings` then
`quorum embed` run (their ingest session, infra/ingest/session.py), over the same texts in a
scratch index.

Runs as `python -m lab.bench.embed` too, so a GPU machine needs only torch and
sentence-transformers (not the CLI's dependencies) to measure the encoder; `--end-to-end` runs
quorum's own ingestion and needs its dependencies.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from infra.corpus_encoder import batch_size_for, encode_corpus

PUBMED_ABSTRACTS = 26_000_000
"""Citations with an abstract in PubMed's annual baseline (issue 31: some 26 M of 36-38 M)."""
WARMUP = 2
"""Batches encoded before timing (CUDA kernels compiled, allocator warm)."""


def read_texts(corpus: Path, size: int, words: int = 0) -> list[str]:
    """Return `size` document texts (title first, as `quorum embed` embeds them), cycled.

    With `words`, consecutive documents are joined until a text holds at least that many words:
    the shared corpus's abstracts are short (median 29 words), and at 250 words nearly every
    text reaches MiniLM's 256-token limit, the most an abstract of any length can cost it.
    """
    opener = gzip.open if corpus.suffix == ".gz" else open
    found: list[str] = []
    with opener(corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                doc = json.loads(line)
                title, abstract = doc.get("title") or "", doc.get("abstract") or ""
                # infra.embeddings.document_text, kept import-free for a bare GPU machine
                found.append(f"{title}. {abstract}".strip(". ") if title else abstract)
    if not found:
        raise ValueError(f"{corpus}: no documents")
    if words:
        joined, parts, count = [], [], 0
        for text in found:
            parts.append(text)
            count += len(text.split())
            if count >= words:
                joined.append(" ".join(parts))
                parts, count = [], 0
        found = joined or [" ".join(parts)]
    return [found[i % len(found)] for i in range(size)]


def load_model(path: Path, device: str) -> Any:
    """Load a sentence-transformers directory as `quorum embed` does (half precision on CUDA)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device=device, local_files_only=True)
    if device == "cuda":
        model.half()
    return model


def bench_embed(
    model_dir: Path,
    corpus: Path,
    *,
    size: int,
    device: str,
    words: int = 0,
    workers: list[int],
    batch_size: int | None = None,
) -> dict[str, Any]:
    """Time `encode_corpus` over `size` texts once for each count of tokenizing workers."""
    import torch

    texts = read_texts(corpus, size, words)
    model = load_model(model_dir, device)
    batch = batch_size_for(device, batch_size)
    tokenizer = model.tokenizer
    limit = int(model.max_seq_length)
    sample = texts[: min(len(texts), 2000)]
    lengths = [len(ids) for ids in tokenizer(sample, truncation=False)["input_ids"]]
    runs = []
    for count in workers:
        encode_corpus(model, texts[: batch * WARMUP], batch_size=batch, workers=count)
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        vectors = encode_corpus(model, texts, batch_size=batch, workers=count)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        rate = len(texts) / seconds
        runs.append(
            {
                "path": "encode" if count == 0 else "pipelined",
                "workers": count,
                "seconds": round(seconds, 2),
                "docs_per_s": round(rate),
                "hours_for_26m": round(PUBMED_ABSTRACTS / rate / 3600, 2),
                "gpu_peak_mib": (
                    round(torch.cuda.max_memory_allocated() / 2**20) if device == "cuda" else None
                ),
                "dim": int(vectors.shape[1]),
            }
        )
    return {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else device,
        "model": model_dir.name,
        "docs": len(texts),
        "words_per_text_mean": round(sum(len(t.split()) for t in sample) / len(sample), 1),
        "batch_size": batch,
        "max_seq_length": limit,
        "tokens_per_text_mean": round(sum(min(n, limit) for n in lengths) / len(lengths), 1),
        "truncated_share": round(sum(n > limit for n in lengths) / len(lengths), 3),
        "runs": runs,
        "best_docs_per_s": max(r["docs_per_s"] for r in runs),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "torch_threads": torch.get_num_threads(),
    }


def bench_embed_command(
    model_dir: Path,
    corpus: Path,
    *,
    size: int,
    device: str,
    words: int = 0,
    batch_size: int = 1024,
) -> dict[str, Any]:
    """Run `quorum index --no-embeddings` then `quorum embed` over `size` texts, and time both.

    The same texts as `bench_embed`, written as a .jsonl file into a scratch home, indexed and
    embedded through the ingest session the commands use (`IngestSession.index`, then
    `IngestSession.embed`: reading the index a batch at a time, the encoder, the int8 vectors
    written in place, a commit every 8,192): what a user's `quorum embed` gets, against what its
    encoder alone does.
    """
    import tempfile

    from infra.ingest.session import IngestSession
    from infra.settings import Settings
    from lab.bench.synthetic import SYNTHETIC_PMID

    texts = read_texts(corpus, size, words)
    with tempfile.TemporaryDirectory(prefix="quorum-bench-embed-") as tmp:
        source = Path(tmp) / "abstracts.jsonl"
        with open(source, "w", encoding="utf-8") as fh:
            for k, text in enumerate(texts):
                fh.write(json.dumps({"pmid": str(SYNTHETIC_PMID + k), "abstract": text}) + "\n")
        settings = Settings(
            home=Path(tmp) / "home",
            search={"backend": "embedded", "index": "bench-embed"},
            embeddings={"path": model_dir, "device": device},
        )
        started = time.perf_counter()
        with IngestSession(settings, embeddings=False) as session:
            indexed = session.index([source], batch_size=batch_size)
        index_s = time.perf_counter() - started
        started = time.perf_counter()
        with IngestSession(settings) as session:
            report = session.embed(batch_size=batch_size, commit_every=8192)
        wall = time.perf_counter() - started
    rate = report.docs_per_s
    return {
        "docs": len(texts),
        "indexed": indexed.upserted,
        "index_s": round(index_s, 1),
        "index_docs_per_s": round(len(texts) / index_s),
        "embedded": report.embedded,
        "embed_s": round(report.seconds, 1),
        "embed_docs_per_s": round(rate),
        "hours_for_26m": round(PUBMED_ABSTRACTS / rate / 3600, 2) if rate else None,
        "model_load_s": round(wall - report.seconds, 1),
        "batch_size": batch_size,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure from the command line; print one JSON object."""
    parser = argparse.ArgumentParser(prog="python -m lab.bench.embed", description=__doc__)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=0, help="join documents to this length")
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--workers", default="0,15", help="comma-separated worker counts (0: encode)"
    )
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument(
        "--end-to-end", action="store_true", help="also time `quorum index` + `quorum embed`"
    )
    args = parser.parse_args(argv)
    report = bench_embed(
        args.model,
        args.corpus,
        size=args.docs,
        device=args.device,
        words=args.words,
        workers=[int(w) for w in args.workers.split(",") if w.strip()],
        batch_size=args.batch_size,
    )
    if args.end_to_end:
        report["command"] = bench_embed_command(
            args.model, args.corpus, size=args.docs, device=args.device, words=args.words
        )
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
