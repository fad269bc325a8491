"""A persistent LLM response cache behind LangChain's own cache interface.

LangChain looks a call up by (prompt, llm_string) before calling a model when the model has a
`cache`; llm_string carries the model's identity and every call parameter (temperature,
schema, max tokens), so a hit is the same request. langchain-core ships only an in-memory
cache and langchain-community (which had SQLite) is being sunset, so the storage is here:
one SQLite table, WAL mode, safe across threads and processes.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.load import dumps, loads


class SQLiteLLMCache(BaseCache):
    """Generations keyed by a hash of (prompt, llm_string), stored in one SQLite file."""

    def __init__(self, path: Path, *, namespace: str = "", _shared: SQLiteLLMCache | None = None):
        self.namespace = namespace
        if _shared is not None:  # a view of the same database under another namespace
            self.path, self._lock, self._db = _shared.path, _shared._lock, _shared._db
            return
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )

    def scoped(self, namespace: str) -> SQLiteLLMCache:
        """Return a view of this cache whose keys also carry `namespace`.

        llm_string names a model only as far as its LangChain class reports it (a local
        pipeline reports little); scoping by quorum's whole model spec keeps two models apart.
        """
        return SQLiteLLMCache(self.path, namespace=namespace, _shared=self)

    def _key(self, prompt: str, llm_string: str) -> str:
        text = f"{self.namespace}\x00{llm_string}\x00{prompt}"
        return hashlib.sha256(text.encode()).hexdigest()

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """Return the cached generations for this exact request, if any."""
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM generations WHERE key = ?", (self._key(prompt, llm_string),)
            ).fetchone()
        if row is None:
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # `loads` announces itself as beta on every call
                return loads(row[0], allowed_objects="core")
        except Exception:  # written by another LangChain version: a miss, not a failure
            return None

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store the generations of a request."""
        value = dumps([_storable(g) for g in return_val])
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO generations (key, value) VALUES (?, ?)",
                (self._key(prompt, llm_string), value),
            )

    def clear(self, **kwargs: Any) -> None:
        """Forget every cached generation (of every namespace)."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM generations")

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


def _storable(generation: Any) -> Any:
    """Keep structured output's parsed object as plain data (LangChain accepts a dict there)."""
    message = getattr(generation, "message", None)
    parsed = message.additional_kwargs.get("parsed") if message is not None else None
    if parsed is None or not hasattr(parsed, "model_dump"):
        return generation
    kwargs = message.additional_kwargs | {"parsed": parsed.model_dump(mode="json")}
    return generation.model_copy(
        update={"message": message.model_copy(update={"additional_kwargs": kwargs})}
    )
