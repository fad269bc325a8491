"""What a training run may change, with its defaults: stated once here, read by `quorum train`.

A module of its own, light to import: the command reads the defaults to show and apply them
before any model library loads (infra/training/trainers.py does the training).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass
class TrainOptions:
    """What a training run may change; every field is recorded in the card."""

    epochs: int = 1
    """Passes over the training rows; the dev split keeps the best epoch."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where to train: "auto" takes a GPU when there is one."""
    seed: int = 13
    """Seed of the dev split, the sampling and the initialisation."""
    batch_size: int = 32
    """Rows per step (the retriever's; `quorum train reranker` asks for fewer)."""
    learning_rate: float = 2e-5
    """The optimiser's learning rate."""
    max_length: int = 128
    """Tokens a row is cut to."""
    max_positives: int = 4
    """Gold rows used per question."""
    negatives: int = 7
    """BM25 hard negatives per question."""
    dev_fraction: float = 0.1
    """Share of the questions held out as the dev split."""
    dev_max: int = 100
    """Dev questions at most."""
    dev_depth: int = 50
    """The cross-encoder's head on dev: what rerank.cross_encoder.top_n rescores."""
    level: Literal["document", "sentence"] = "document"
    """The reranker's rows: (question, abstract) or (question, gold sentence)."""
    base_model: Path | None = None
    """The model to start from (None: the shipped default)."""
    retriever: Path | None = None
    """A trained retriever: negatives and the dev head come from BM25 fused with it."""
