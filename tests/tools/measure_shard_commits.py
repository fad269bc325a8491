"""What does a sharded writer's second phase (its deletes, a second commit a shard) cost a load?

A measurement for issue 31 (a command, not a test): `bench scale`'s synthetic corpus (the real
documents resampled, seed 0) is written text only into a fresh embedded index of `--shards`
tantivy shards, committing every `--commit-every` documents, and the time spent in
`apply_deletes` (phase 2, `infra/search/embedded_shards.py`) is reported beside the whole write.
Run it at two commits to compare them: the writer skips phase 2 for a batch whose PMIDs are all
new (since the commit that added this tool), so a commit before it shows what phase 2 cost.

    uv run python tests/tools/measure_shard_commits.py --size 1000000 --commit-every 100000 \\
        --shards 2 [--corpus ../shared/data/corpus/pubmed_docs.jsonl.gz] [--out DIR]

One JSON object out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import infra.search.embedded_store as store
from infra.ingest.sources import normalize
from infra.search.corpus import read_jsonl
from infra.search.embedded_open import remove_index
from lab.bench.synthetic import SentencePool

CORPUS = Path(__file__).resolve().parents[2].parent / "shared/data/corpus/pubmed_docs.jsonl.gz"


def measure(corpus: Path, size: int, every: int, shards: int, out: Path) -> dict[str, Any]:
    """Write the corpus into a fresh index at `out`; return the write's and phase 2's seconds."""
    docs = [normalize(d) for d in read_jsonl(corpus) if isinstance(d, dict)]
    spent, calls = 0.0, 0
    real = store.apply_deletes

    def timed(*args: Any) -> None:
        nonlocal spent, calls
        started = time.perf_counter()
        real(*args)
        spent, calls = spent + time.perf_counter() - started, calls + 1

    store.apply_deletes = timed
    shutil.rmtree(out, ignore_errors=True)
    writer = store.EmbeddedWriter(out, shards=shards)
    started, since = time.perf_counter(), 0
    for batch in SentencePool(docs).batches(size, seed=0):
        writer.upsert(batch.docs, None)
        since += len(batch.docs)
        if since >= every:
            writer.commit()
            since = 0
    writer.close()
    total = time.perf_counter() - started
    return {
        "size": size,
        "commit_every": every,
        "shards": shards,
        "write_s": round(total, 1),
        "phase2_s": round(spent, 1),
        "phase2_calls": calls,
        "docs_per_s": round(size / total),
    }


def main() -> None:
    """Parse the arguments, measure, print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--commit-every", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path, default=None, help="where the index goes (removed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quorum-shard-commits-") as tmp:
        out = args.out or Path(tmp) / "index"
        figures = measure(args.corpus, args.size, args.commit_every, args.shards, out)
        if args.out is None:
            remove_index(out)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
