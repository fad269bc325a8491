"""Dev-split figures: the held-out questions' BM25 hits reranked by the model being trained.

The evaluators plug into sentence-transformers' trainers (`evaluator=`), so the trainer keeps
the epoch whose dev figure is best (`load_best_model_at_end`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from infra.bioasq.metrics import average_precision, recall_at
from infra.search.fusion import blend, fuse
from infra.training.data import Example, TrainingData

ALPHAS = tuple(round(a * 0.1, 1) for a in range(11))
"""Fusion weights of cosine tried on dev (0: BM25 alone, 1: cosine alone)."""


def ranking_figures(rankings: Sequence[list[str]], examples: Sequence[Example]) -> dict[str, float]:
    """Return recall@10, recall@100 and BioASQ MAP@10 of rankings against their gold."""
    r10 = [recall_at(r, e.gold, 10) for r, e in zip(rankings, examples, strict=True)]
    r100 = [recall_at(r, e.gold, 100) for r, e in zip(rankings, examples, strict=True)]
    aps = [
        average_precision(r[:10], e.question.documents)
        for r, e in zip(rankings, examples, strict=True)
    ]
    return {
        "recall@10": round(float(np.mean(r10)), 4),
        "recall@100": round(float(np.mean(r100)), 4),
        "map@10": round(float(np.mean(aps)), 4),
    }


def bm25_figures(examples: Sequence[Example]) -> dict[str, float]:
    """Return the dev figures of BM25's own order (the floor the models must beat)."""
    return ranking_figures([[p for p, _ in e.hits] for e in examples], examples)


class FusionDevEvaluator(SentenceEvaluator):
    """Rerank dev questions' BM25 hits by fused BM25 + cosine; report the best weight's figures.

    Every hit is fused (data.DEV_DEPTH of them), as rerank fuses every candidate.
    """

    def __init__(self, data: TrainingData, batch_size: int = 64):
        super().__init__()
        self.examples = [e for e in data.dev if e.hits]
        self.data = data
        self.batch_size = batch_size
        self.primary_metric = "map@10"
        self.history: list[dict[str, Any]] = []

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: float = -1, steps: int = -1
    ) -> dict[str, float]:
        """Embed the dev questions and their hits; sweep the fusion weight."""
        pmids = sorted({p for e in self.examples for p, _ in e.hits})
        row = {p: i for i, p in enumerate(pmids)}
        docs = model.encode(
            [self.data.text(p) for p in pmids],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )
        queries = model.encode(
            [e.question.body for e in self.examples],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )
        sweep = {}
        for alpha in ALPHAS:
            rankings = []
            for example, query in zip(self.examples, queries, strict=True):
                hits = [p for p, _ in example.hits]
                bm25 = np.array([s for _, s in example.hits], dtype=np.float32)
                cosine = docs[[row[p] for p in hits]] @ query
                scores = fuse(bm25, cosine, "interpolate", alpha, 60)
                rankings.append([hits[i] for i in np.argsort(-scores, kind="stable")])
            sweep[alpha] = ranking_figures(rankings, self.examples)
        best = max(ALPHAS, key=lambda a: (sweep[a]["map@10"], sweep[a]["recall@10"]))
        figures = {"alpha": best, **sweep[best], "cosine_only_map@10": sweep[1.0]["map@10"]}
        self.history.append({"epoch": epoch, "steps": steps, **figures})
        return self.prefix_name_to_metrics(figures, "dev")


class CrossEncoderDevEvaluator(SentenceEvaluator):
    """Rescore each dev group's candidates with the cross-encoder; report recall@10 and MAP@10.

    A group is (query, candidate ids, candidate texts, gold ids, ids kept after the head,
    first-stage scores): BM25's head of documents for `--level document`, a question's
    sentences for `sentence` (no first stage). Where groups carry first-stage scores, the
    cross-encoder's weight in the blend rerank makes (rerank.cross_encoder.weight) is swept
    and the best weight's figures reported.
    """

    def __init__(self, groups: Sequence[DevGroup], batch_size: int = 32):
        super().__init__()
        self.groups = list(groups)
        self.batch_size = batch_size
        self.primary_metric = "map@10"
        self.history: list[dict[str, Any]] = []

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: float = -1, steps: int = -1
    ) -> dict[str, float]:
        """Return dev recall@10 and MAP@10 of the groups reordered by the model."""
        scores = [
            np.asarray(
                model.predict(
                    [(q, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False
                ),
                dtype=np.float32,
            )
            if texts
            else np.zeros(0, dtype=np.float32)
            for q, _, texts, _, _, _ in self.groups
        ]
        if any(group[5] for group in self.groups):
            sweep = {w: group_figures(self.groups, scores, w) for w in ALPHAS}
            best = max(ALPHAS, key=lambda w: (sweep[w]["map@10"], sweep[w]["recall@10"]))
            figures = {"weight": best, **sweep[best], "ce_only_map@10": sweep[1.0]["map@10"]}
        else:
            figures = group_figures(self.groups, scores, 1.0)
        self.history.append({"epoch": epoch, "steps": steps, **figures})
        return self.prefix_name_to_metrics(figures, "dev")


DevGroup = tuple[str, list[str], list[str], list[str], list[str], list[float]]


def group_figures(
    groups: Sequence[DevGroup], scores: Sequence[np.ndarray], weight: float
) -> dict[str, float]:
    """Return recall@10 and MAP@10 of each group's candidates ordered by its `scores`.

    With first-stage scores in the group, they are blended with `scores` as rerank blends them
    (`weight` on the cross-encoder); without, `scores` alone order the candidates.
    """
    r10, aps = [], []
    for (_, ids, _, gold, tail, first), score in zip(groups, scores, strict=True):
        if first and score.size:
            score = blend(np.asarray(first, dtype=np.float32), score, weight)
        ranked = [ids[i] for i in np.argsort(-score, kind="stable")] + tail
        r10.append(recall_at(ranked, gold, 10))
        aps.append(average_precision(ranked[:10], gold))
    return {
        "recall@10": round(float(np.mean(r10)), 4) if r10 else 0.0,
        "map@10": round(float(np.mean(aps)), 4) if aps else 0.0,
    }


def document_groups(data: TrainingData, examples: Sequence[Example], depth: int) -> list[DevGroup]:
    """Return the dev questions' BM25 heads, with their BM25 scores, as dev groups."""
    groups = []
    for e in examples:
        head = e.hits[:depth]
        ids = [p for p, _ in head]
        groups.append(
            (
                e.question.body,
                ids,
                [data.text(p) for p in ids],
                e.gold,
                [p for p, _ in e.hits[depth:]],
                [s for _, s in head],
            )
        )
    return groups
