"""Rebuild the demo corpus in infra/data from PubMedQA (for maintainers; reads ../shared)."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from infra.embeddings import HuggingFaceEmbedder, document_text  # noqa: E402
from infra.relevance import FREQUENCIES, count_frequencies  # noqa: E402
from infra.settings import EmbeddingSettings  # noqa: E402

SOURCE = ROOT.parent / "shared" / "data" / "pubmedqa"
OUT = ROOT / "infra" / "data"


def write_frequencies() -> None:
    """Write the demo corpus's document frequencies, the relevance check's rarity reference."""
    counts, n = count_frequencies()
    table = {"documents": n, "df": dict(sorted(counts.items()))}
    with gzip.open(FREQUENCIES, "wt", encoding="utf-8", compresslevel=9) as fh:
        json.dump(table, fh, ensure_ascii=False, separators=(",", ":"))
    print(f"{len(counts)} terms over {n} documents → {FREQUENCIES.name}")


def main() -> None:
    """Write pubmedqa_demo.jsonl.gz, its vectors, its document frequencies and the licence."""
    records = json.loads((SOURCE / "ori_pqal.json").read_text())
    docs = []
    for pmid, item in records.items():
        parts = [
            f"{label}: {text}" for label, text in zip(item["LABELS"], item["CONTEXTS"], strict=True)
        ]
        parts.append(f"CONCLUSIONS: {item['LONG_ANSWER']}")
        docs.append(
            {
                "pmid": pmid,
                "title": item["QUESTION"],
                "abstract": " ".join(parts),
                "year": int(item["YEAR"]) if item.get("YEAR") else None,
                "mesh": item.get("MESHES", []),
            }
        )
    with gzip.open(OUT / "pubmedqa_demo.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as fh:
        for doc in docs:
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
    embedder = HuggingFaceEmbedder(EmbeddingSettings())
    vectors = embedder.embed_documents([document_text(d["title"], d["abstract"]) for d in docs])
    np.save(OUT / "pubmedqa_demo.vectors.f16.npy", vectors.astype(np.float16))
    shutil.copy(SOURCE / "LICENSE", OUT / "LICENSE.pubmedqa")
    print(f"{len(docs)} documents, vectors {vectors.shape}")
    write_frequencies()


if __name__ == "__main__":
    # --frequencies: only the document frequencies, from the shipped corpus (no ../shared).
    write_frequencies() if sys.argv[1:] == ["--frequencies"] else main()
