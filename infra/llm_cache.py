"""A persistent cache of parsed model replies: repeated greedy calls are free and identical.

Only replies that parsed into their schema are kept: a failed or malformed reply must reach the
endpoint again on the next attempt, never come back from here. (LangChain's own cache stores a
generation before the structured-output parser has seen it, so a bad reply would be replayed to
every later identical call; that is why this cache sits above the parser, in ChatModel.)

The key is a hash of the model's whole spec, the schema, the messages and the call parameters.
One SQLite table, WAL mode, safe across threads and processes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


class ReplyCache:
    """Parsed replies by request key, in one SQLite file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )

    @staticmethod
    def key(*parts: Any) -> str:
        """Return the key of a request made of these JSON-able parts."""
        text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored reply for this key, if any."""
        with self._lock:
            row = self._db.execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError:
            return None

    def put(self, key: str, reply: dict[str, Any]) -> None:
        """Store a reply that parsed."""
        value = json.dumps(reply, ensure_ascii=False)
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO replies (key, value) VALUES (?, ?)", (key, value)
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def clear(self) -> None:
        """Forget every reply."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM replies")

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()
