"""A reranker's hard negatives and dev head from the first stage it will follow, not BM25 alone.

`train reranker --retriever DIR` re-orders every training and dev question's BM25 hits as rerank
orders its candidates behind that retriever: BM25 and the retriever's cosine, min-max fused with
the weight its training chose (`rerank.alpha`). The negatives are then the documents that first
stage ranks highest without being gold, the ones a reranker behind it must push down, and the
dev groups blend the cross-encoder with the fused scores, so the weight chosen on dev is the
weight to use behind that retriever. Measured on 11B: behind the fine-tuned retriever, a
cross-encoder trained on BM25's negatives and weighted against BM25's head added nothing, and
the sentence scorer's snippets lost precision to the sentences of the retriever's near misses.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from infra.errors import UserError
from infra.search.fusion import fuse
from infra.training.card import RECORD
from infra.training.data import TrainingData


def retriever_alpha(retriever: Path) -> float:
    """Return the fusion weight a `quorum train retriever` run chose (UserError if none)."""
    try:
        record = json.loads((Path(retriever) / RECORD).read_text(encoding="utf-8"))
        return float(record["chosen"]["alpha"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(
            f"{retriever}: not a retriever `quorum train retriever` made (no {RECORD} with its "
            "chosen fusion weight); pass the --output of a retriever training run"
        ) from None


def fuse_hits(data: TrainingData, retriever: Path, device: str, *, batch_size: int = 64) -> float:
    """Re-order every question's hits by BM25 fused with the retriever's cosine; return α.

    Each example's hits become (PMID, fused score), best first: its negatives, the dev heads
    and their first-stage scores all follow from them.
    """
    from sentence_transformers import SentenceTransformer

    alpha = retriever_alpha(retriever)
    model = SentenceTransformer(str(retriever), device=device, local_files_only=True)
    examples = [e for e in data.train + data.dev if e.hits]
    if not examples:
        return alpha
    pmids = sorted({p for e in examples for p, _ in e.hits})
    row = {p: i for i, p in enumerate(pmids)}
    docs = model.encode(
        [data.text(p) for p in pmids],
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=None,
    )
    questions = model.encode(
        [e.question.body for e in examples],
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
    )
    for example, question in zip(examples, questions, strict=True):
        ids = [p for p, _ in example.hits]
        bm25 = np.array([s for _, s in example.hits], dtype=np.float32)
        cosine = docs[[row[p] for p in ids]] @ question
        fused = fuse(bm25, cosine, "interpolate", alpha, 60)
        order = np.argsort(-fused, kind="stable")
        example.hits = [(ids[i], float(fused[i])) for i in order]
    return alpha
