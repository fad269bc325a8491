"""`quorum bench train`: one training run of `quorum train`, timed on this machine.

Reports the whole command's time (reading the files, mining BM25 negatives, the dev evaluations)
beside the trainer's own, the steps and seconds per step, peak memory and the load average the
run shared the cores with: on 2 cores another busy process doubles a step.
"""

from __future__ import annotations

import math
import os
import resource
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infra.training.trainers import TrainOptions, train_reranker, train_retriever

TARGET_S = 45 * 60
"""One bi-encoder epoch on the shared 2,310 questions on 2 CPU cores (issue 15)."""


def bench_train(
    kind: str,
    questions: Sequence[Path],
    corpus: Sequence[Path],
    options: TrainOptions,
    output: Path | None = None,
) -> dict[str, Any]:
    """Train once (into `output`, or a scratch directory removed after) and time it."""
    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="quorum-bench-train-") as tmp:
        target = output or Path(tmp) / "model"
        run = train_retriever if kind == "retriever" else train_reranker
        record = run(questions, corpus, target, options)
    total = time.perf_counter() - started
    rows = record["data"]["training_rows"]
    steps = math.ceil(rows / options.batch_size) * options.epochs
    timed = kind == "retriever" and record["device"] == "cpu" and options.epochs == 1
    return {
        "kind": kind,
        "level": options.level if kind == "reranker" else None,
        "device": record["device"],
        "cores": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "train_questions": record["data"]["train_questions"],
        "dev_questions": record["data"]["dev_questions"],
        "training_rows": rows,
        "batch_size": options.batch_size,
        "epochs": options.epochs,
        "steps": steps,
        "train_seconds": record["train_seconds"],
        "seconds_per_step": round(record["train_seconds"] / steps, 2) if steps else None,
        "total_seconds": round(total, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        # The target is stated for a one-epoch bi-encoder on CPU; other runs report no verdict.
        "target_s": TARGET_S if timed else None,
        "met": total <= TARGET_S if timed else None,
        "dev": record["dev"],
        "output": str(output) if output else None,
        "settings_lines": record["settings_lines"] if output else [],
    }
