"""Optional second-stage rerankers (cross-encoders) loaded from a local model directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

import infra.offline
from infra.embeddings import resolve_device
from infra.settings import CrossEncoderSettings


class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant."""

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Return one relevance score per passage."""
        ...


class SentenceTransformersReranker:
    """sentence-transformers' CrossEncoder (e.g. ms-marco MiniLM, BGE rerankers)."""

    def __init__(self, path: Path, batch_size: int, max_length: int, device: str = "cpu"):
        from sentence_transformers import CrossEncoder

        infra.offline.quiet_transformers()
        self._model = CrossEncoder(
            str(path), device=device, max_length=max_length, local_files_only=True
        )
        if device == "cuda":
            self._model.half()  # half precision on a GPU: scores keep their order
        self._batch = batch_size

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Return one relevance score per passage."""
        pairs = [(query, p) for p in passages]
        return np.asarray(
            self._model.predict(pairs, batch_size=self._batch, show_progress_bar=False), np.float32
        )


class FlagReranker:
    """FlagEmbedding's FlagReranker (bge-reranker family)."""

    def __init__(self, path: Path, batch_size: int, max_length: int, device: str = "cpu"):
        from FlagEmbedding import FlagReranker as _Flag

        infra.offline.quiet_transformers()
        self._model = _Flag(
            str(path),
            use_fp16=device == "cuda",
            devices=device,
            batch_size=batch_size,
            max_length=max_length,
        )

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Return one relevance score per passage."""
        scores = self._model.compute_score([(query, p) for p in passages])
        return np.atleast_1d(np.asarray(scores, dtype=np.float32))


def load_reranker(settings: CrossEncoderSettings, device: str = "auto") -> Reranker | None:
    """Load the configured cross-encoder on `device` (embeddings.device); None when unset."""
    if settings.path is None:
        return None
    if not (Path(settings.path) / "config.json").exists():
        raise FileNotFoundError(
            f"no model at {settings.path} (a directory with config.json is expected)"
        )
    kind = FlagReranker if settings.kind == "flag" else SentenceTransformersReranker
    return kind(
        Path(settings.path), settings.batch_size, settings.max_length, resolve_device(device)
    )
