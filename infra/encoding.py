"""Embedding a whole corpus: texts tokenized by worker threads ahead of the model.

On a GPU the tokenizer, not the model, is the bottleneck: MiniLM on one H100 embeds ~1,800
abstracts/s through sentence-transformers' `encode` (tokenizing each batch, then running it)
and ~29,000/s on batches tokenized beforehand (issue 18's measurements). Here worker threads
tokenize the next batches while the model runs the current one — the fast tokenizers' Rust
code releases the GIL, and each worker has its own copy of the tokenizer (one tokenizer used
from two threads at once fails with "Already borrowed"). Texts go longest first, as `encode`
orders them, so a batch pads to similar lengths; vectors come back in the texts' order.
On a CPU the model and the tokenizer share the same cores, so no workers by default.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

AHEAD = 2
"""Batches each worker tokenizes ahead of the model."""
BATCH_SIZES = {"cpu": 64, "mps": 128, "cuda": 512}
"""Texts per forward pass when embeddings.batch_size is unset, by device."""


def batch_size_for(device: str, setting: int | None) -> int:
    """Return the batch size: the setting, else what suits the device."""
    return setting or BATCH_SIZES.get(device, 64)


def workers_for(device: str, setting: int | None) -> int:
    """Return the tokenizing threads: the setting, else one per spare core on an accelerator."""
    if setting is not None:
        return setting
    return 0 if device == "cpu" else max(1, min(15, (os.cpu_count() or 2) - 1))


def encode_corpus(model: Any, texts: Sequence[str], *, batch_size: int, workers: int) -> np.ndarray:
    """Return unit vectors (float32) for `texts` from a sentence-transformers `model`.

    With `workers` = 0 this is the model's own `encode`; otherwise the same vectors, tokenized
    in `workers` threads ahead of the forward passes.
    """
    dim = model.get_embedding_dimension()
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    if workers <= 0:
        vectors = model.encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)
    import torch
    from sentence_transformers.util import batch_to_device

    order = np.argsort([-len(t) for t in texts], kind="stable")
    batches = [
        [texts[i] for i in order[start : start + batch_size]]
        for start in range(0, len(texts), batch_size)
    ]
    tokenize = _ThreadTokenizer(model)
    out = np.empty((len(texts), dim), dtype=np.float32)
    with ThreadPoolExecutor(workers, thread_name_prefix="tokenize") as pool:
        queued = deque(pool.submit(tokenize, b) for b in batches[: workers * AHEAD])
        following = len(queued)
        for k in range(len(batches)):
            features = queued.popleft().result()
            if following < len(batches):
                queued.append(pool.submit(tokenize, batches[following]))
                following += 1
            with torch.inference_mode():
                found = model(batch_to_device(features, model.device))["sentence_embedding"]
                found = torch.nn.functional.normalize(found.float(), p=2, dim=1)
            out[order[k * batch_size : (k + 1) * batch_size]] = found.cpu().numpy()
    return out


class _ThreadTokenizer:
    """The model's tokenization (its input module's `preprocess`), a tokenizer copy per thread."""

    def __init__(self, model: Any):
        self._model = model
        self._local = threading.local()

    def __call__(self, texts: list[str]) -> dict[str, Any]:
        module = getattr(self._local, "module", None)
        if module is None:
            first = self._model[0]  # the Transformer module: preprocess() runs its processor
            module = copy.copy(first)
            module.processor = copy.deepcopy(first.processor)
            self._local.module = module
        return module.preprocess(texts)
