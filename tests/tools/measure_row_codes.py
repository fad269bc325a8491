"""How much of the default path's exact top 300 do row codes and a shortlist keep?

A measurement for issue 31 (a command, not a test). The default path fuses BM25 with the cosine
of each of up to 10,000 candidates; with row codes (`infra.search.row_codes`) the cosines are
estimated from 48-byte codes and read exactly for a shortlist (`infra.search.shortlist`). This
asks every question's keyword query of an embedded index, fuses as `rerank` does (interpolate,
0.6) once with every cosine exact and once through `fusion_cosines` at each `--shortlists`, and
reports the share of the exact top 300 kept, the share of the top 300 found whose exact fused
score reaches the exact 300th (tie-aware: the synthetic corpus's repeated text ties often), and
recall@10 of the gold both ways.

    uv run python tests/tools/measure_row_codes.py corpus --index HOME/indexes/NAME \\
        --questions ../shared/data/bioasq [--shortlists 300,500,1000]
    uv run python tests/tools/measure_row_codes.py job --job HOME/bench/scale/job-query.json

`corpus` copies the index (the shared corpus's 14,448 documents with their real MiniLM vectors)
to a temporary directory and builds its codes there, the index itself left as it was; the
questions' vectors come from the configured embedding model. `job` reads a `bench scale` index
that has codes (`quorum index` builds them from search.row_codes_rows on) and the job's questions.
One JSON object out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from infra.bioasq.formats import load_questions
from infra.search.embedded import EmbeddedIndex
from infra.search.fusion import fuse
from infra.search.keywords import keyword_query
from infra.search.query import QueryError
from infra.search.shortlist import fusion_cosines
from infra.settings import load_settings
from lab.bench.recall import tie_aware_recall

TOP = 300


def compare(
    index: EmbeddedIndex,
    queries: list[str],
    vectors: np.ndarray,
    gold: list[set[str]],
    shortlists: list[int],
) -> dict[str, Any]:
    """Return, per shortlist, the share of the exact top 300 kept and recall@10 both ways."""
    kept: dict[int, list[float]] = {s: [] for s in shortlists}
    ties: dict[int, list[float]] = {s: [] for s in shortlists}
    recall: dict[str, list[float]] = {"exact": [], **{str(s): [] for s in shortlists}}
    depth = []
    for query, vector, wanted in zip(queries, vectors, gold, strict=True):
        try:
            result = index.search(query, 10_000)
        except QueryError:
            continue
        pmids, bm25 = result.pmids, result.scores
        if not pmids:
            continue
        depth.append(len(pmids))
        exact = index.similarities(pmids, vector)
        scored = fuse(bm25, exact, "interpolate", 0.6, 60)
        truth = np.argsort(-scored, kind="stable")[:TOP]
        if wanted:
            recall["exact"].append(len({pmids[i] for i in truth[:10]} & wanted) / len(wanted))
        for shortlist in shortlists:
            cosine, _ = fusion_cosines(
                index,
                pmids,
                bm25,
                vector,
                method="interpolate",
                alpha=0.6,
                rrf_k=60,
                shortlist=shortlist,
                keep=TOP,
            )
            top = np.argsort(-fuse(bm25, cosine, "interpolate", 0.6, 60), kind="stable")[:TOP]
            kept[shortlist].append(len(set(top) & set(truth)) / len(truth))
            # Tied at the 300th place, either document is as right (synthetic text repeats).
            ties[shortlist].append(tie_aware_recall(scored[top], scored[truth[-1]], len(truth)))
            if wanted:
                found = {pmids[i] for i in top[:10]}
                recall[str(shortlist)].append(len(found & wanted) / len(wanted))
    return {
        "questions": len(depth),
        "mean_candidates": round(float(np.mean(depth)), 1),
        "over_shortlist_1000": int(sum(d > 1032 for d in depth)),
        "kept_of_exact_top300": {str(s): _spread(v) for s, v in kept.items()},
        "scoring_at_least_the_exact_300th": {str(s): _spread(v) for s, v in ties.items()},
        "recall_at_10": {k: round(float(np.mean(v)), 4) for k, v in recall.items()},
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": round(float(np.mean(values)), 5),
        "p5": round(float(np.percentile(values, 5)), 4),
        "min": round(float(np.min(values)), 4),
    }


def corpus(args: argparse.Namespace) -> dict[str, Any]:
    from infra.embeddings import HuggingFaceEmbedder

    questions = []
    for path in sorted(Path(args.questions).glob("*_golden.json")):
        questions += load_questions(path)
    seen: set[str] = set()
    questions = [q for q in questions if not (q.body in seen or seen.add(q.body))]
    embedder = HuggingFaceEmbedder(load_settings().embeddings)
    vectors = np.asarray([embedder.embed_query(q.body) for q in questions], np.float32)
    gold = [{d.rsplit("/", 1)[-1] for d in q.documents} for q in questions]
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "index"
        shutil.copytree(args.index, copy)
        index = EmbeddedIndex(copy)
        index.dense_stage(ann_rows=10**9, share=1.0, codes_rows=1_000)
        if index.refresh_row_codes() is None:
            raise SystemExit(f"{args.index}: no vectors to code (or codes already built)")
        return compare(
            index, [keyword_query(q.body) for q in questions], vectors, gold, args.shortlists
        )


def job(args: argparse.Namespace) -> dict[str, Any]:
    spec = json.loads(Path(args.job).read_text())
    settings = load_settings(**spec["settings"])
    inputs = np.load(spec["queries"], allow_pickle=True)
    index = EmbeddedIndex(settings.index_dir)
    if index.rough_similarities([], np.zeros(1, np.float32)) is None:
        raise SystemExit(f"{settings.index_dir}: no row codes (quorum index builds them)")
    gold = [set(g) for g in inputs["gold"]]
    return compare(index, list(inputs["queries"]), inputs["vectors"], gold, args.shortlists)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    first = steps.add_parser("corpus")
    first.add_argument("--index", type=Path, required=True)
    first.add_argument("--questions", type=Path, required=True)
    second = steps.add_parser("job")
    second.add_argument("--job", type=Path, required=True)
    for step in (first, second):
        step.add_argument(
            "--shortlists", type=lambda s: [int(x) for x in s.split(",")], default=[300, 500, 1000]
        )
    args = parser.parse_args()
    out = corpus(args) if args.step == "corpus" else job(args)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
