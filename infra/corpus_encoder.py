"""Embedding a whole corpus: texts tokenized by worker threads ahead of the model.

On a GPU the tokenizer, not the model, is the bottleneck: MiniLM on one H200 embeds 2,800
full-length abstracts/s through sentence-transformers' `encode` (tokenizing each batch, then
running it) and 39,500/s on batches tokenized beforehand (`quorum bench embed`,
docs/measured.md). Here worker threads tokenize the next batches while the model runs the
current one — the fast tokenizers' Rust code releases the GIL, and each worker has its own copy
of the tokenizer (one tokenizer used from two threads at once fails with "Already borrowed").
Texts go longest first, as `encode` orders them, so a batch pads to similar lengths; vectors
come back in the texts' order. On a CPU the model and the tokenizer share the same cores, so
no workers by default.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

AHEAD = 2
"""Batches each worker tokenizes ahead of the model."""
BATCH_SIZES = {"cpu": 16, "mps": 128, "cuda": 512}
"""Texts per forward pass when embeddings.batch_size is unset, by device.

On a CPU a batch pads every text to its longest, and the padding is computed like the rest:
MiniLM on 2 AVX512 cores (2026-11-28, best of 3) embeds the 157 sentences of 12 abstracts (what
finalize picks snippets from) in 1.22 s at 16 a batch against 2.14 s at 64, and 128 abstracts
in 5.41 s against 5.77 s through `encode_corpus` (8: 5.32 s; 32: 5.81 s)."""


def batch_size_for(device: str, setting: int | None) -> int:
    """Return the batch size: the setting, else what suits the device."""
    return setting or BATCH_SIZES.get(device, 64)


MAX_WORKERS = 4
"""Tokenizing threads by default on an accelerator. Measured on one H100 with 16 host cores
(`quorum bench embed --workers 2,3,4,6,8`, docs/measured.md): 2-4 threads tokenize as fast as
the run allows (8,687 / 7,927 / 7,790-8,766 full-length abstracts/s) and more go slower (6: 7,192,
8: 6,936, 15: 7,070; on an H200, 4: 10,185 against 15: 9,659): `encode_batch_fast` already
spreads each batch over the cores, so further threads only contend for them."""


def workers_for(device: str, setting: int | None) -> int:
    """Return the tokenizing threads: the setting, else up to 4 (one per spare core) off a CPU."""
    if setting is not None:
        return setting
    return 0 if device == "cpu" else max(1, min(MAX_WORKERS, (os.cpu_count() or 2) - 1))


def encode_corpus(model: Any, texts: Sequence[str], *, batch_size: int, workers: int) -> np.ndarray:
    """Return unit vectors (float32) for `texts` from a sentence-transformers `model`.

    With `workers` = 0 this is the model's own `encode`; otherwise the same vectors, tokenized
    in `workers` threads ahead of the forward passes.
    """
    if not texts:
        return np.zeros((0, model.get_embedding_dimension()), dtype=np.float32)
    (vectors,) = encode_stream(model, [texts], batch_size=batch_size, workers=workers)
    return vectors


def encode_stream(
    model: Any, chunks: Iterable[Sequence[str]], *, batch_size: int, workers: int
) -> Iterator[np.ndarray]:
    """Yield unit vectors (float32) for each chunk of texts, in the chunks' order.

    `quorum embed` reads an index a chunk at a time (1,024 documents by default). Encoding each
    chunk on its own started the tokenizing threads afresh every time, and the model waited
    for a chunk's first batch: on a GPU, where tokenizing is the bound, that idle start was
    paid once a chunk. Here the threads tokenize across chunk boundaries — the next chunk's
    batches are queued while the model runs the current one's — so the model sees one stream.
    Within a chunk, texts go longest first (as `encode` orders them); a batch never spans two
    chunks, so each chunk's vectors can be written (and committed) as soon as it is done.
    """
    dim = model.get_embedding_dimension()
    if workers <= 0:
        for texts in chunks:
            if not texts:
                yield np.zeros((0, dim), dtype=np.float32)
                continue
            vectors = model.encode(
                list(texts),
                batch_size=batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            yield np.asarray(vectors, dtype=np.float32)
        return
    import torch
    from sentence_transformers.util import batch_to_device

    tokenize = _ThreadTokenizer(model)
    with ThreadPoolExecutor(workers, thread_name_prefix="tokenize") as pool:
        queued: deque[tuple[Any, ...]] = deque()
        plan = _planned(chunks, dim, batch_size)
        tokenizing = 0  # batches queued for the threads, markers not counted

        def top_up() -> None:
            nonlocal tokenizing
            while tokenizing < workers * AHEAD:
                step = next(plan, None)
                if step is None:
                    return
                out, order, texts, start = step
                future = pool.submit(tokenize, texts) if texts is not None else None
                tokenizing += future is not None
                queued.append((out, future, order, start))

        top_up()
        while queued:
            out, future, order, start = queued.popleft()
            if future is None:  # a chunk is complete: every batch before this marker ran
                top_up()
                yield out
                continue
            features = future.result()
            tokenizing -= 1
            top_up()
            with torch.inference_mode():
                found = model(batch_to_device(features, model.device))["sentence_embedding"]
                found = torch.nn.functional.normalize(found.float(), p=2, dim=1)
            out[order[start : start + len(found)]] = found.cpu().numpy()


def _planned(
    chunks: Iterable[Sequence[str]], dim: int, batch_size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, list[str] | None, int]]:
    """Yield (chunk's output array, its length order, batch texts, first position) per batch.

    After a chunk's batches comes one step with no texts: the marker that hands it back.
    """
    for texts in chunks:
        out = np.empty((len(texts), dim), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            yield out, order, [texts[i] for i in order[start : start + batch_size]], start
        yield out, order, None, -1


class _ThreadTokenizer:
    """The model's tokenization, a tokenizer copy per thread, in Rust as far as it can go.

    sentence-transformers' `preprocess` turns the Rust tokenizer's output into tensors through
    transformers' Python lists, under the GIL: measured on an H200 (docs/measured.md), one
    thread tokenized 3,000 abstracts/s and fifteen threads fewer, while the model ran 39,500/s.
    Here each thread holds its own `tokenizers.Tokenizer` set to the model's truncation and
    padding; `encode_batch` runs without the GIL and numpy builds the tensors. A model whose
    first module is not a fast text tokenizer keeps `preprocess`.
    """

    def __init__(self, model: Any):
        self._model = model
        self._local = threading.local()
        self._fixed: dict[str, Any] | None = None
        self._names: tuple[str, ...] = ()
        first = model[0]
        rust = getattr(getattr(first, "processor", None), "_tokenizer", None)
        if rust is not None:
            sample = first.preprocess(["a"])
            import torch

            names = tuple(k for k, v in sample.items() if isinstance(v, torch.Tensor))
            if set(names) <= {"input_ids", "attention_mask", "token_type_ids"}:
                self._names = names
                self._fixed = {k: v for k, v in sample.items() if k not in names}

    def __call__(self, texts: list[str]) -> dict[str, Any]:
        if self._fixed is None:
            return self._preprocess(texts)
        rust = getattr(self._local, "rust", None)
        if rust is None:
            rust = self._local.rust = self._rust_copy()
        import torch

        # encode_batch_fast (tokenizers >= 0.20) skips the character offsets nothing here reads
        encode = getattr(rust, "encode_batch_fast", rust.encode_batch)
        encodings = encode(texts)
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        features = {k: torch.from_numpy(np.array(columns[k], dtype=np.int64)) for k in self._names}
        return {**features, **self._fixed}

    def _rust_copy(self) -> Any:
        """Return a fresh Rust tokenizer truncating and padding as `preprocess` does."""
        from tokenizers import Tokenizer

        processor = self._model[0].processor
        rust = Tokenizer.from_str(processor.backend_tokenizer.to_str())
        rust.enable_truncation(max_length=int(self._model.max_seq_length))
        rust.enable_padding(
            pad_id=processor.pad_token_id,
            pad_token=processor.pad_token,
            pad_type_id=processor.pad_token_type_id,
            direction=processor.padding_side,
        )
        return rust

    def _preprocess(self, texts: list[str]) -> dict[str, Any]:
        module = getattr(self._local, "module", None)
        if module is None:
            first = self._model[0]  # the Transformer module: preprocess() runs its processor
            module = copy.copy(first)
            module.processor = copy.deepcopy(first.processor)
            self._local.module = module
        return module.preprocess(texts)
