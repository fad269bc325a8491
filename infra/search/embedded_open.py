"""Opening an embedded index's directory: its meta, its tantivy shards, its committed rows.

The writer (`embedded_store`) and the searcher (`embedded`) both open an index through here.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import tantivy

from infra.search.embedded_layout import LAYOUT_VERSION, META, upgrade
from infra.search.embedded_reembed import finish_swap
from infra.search.embedded_shards import rows_landed, shard_count, shard_dirs


def read_meta(path: Path) -> dict[str, Any]:
    """Read an index's meta.json (FileNotFoundError when there is no index)."""
    meta = json.loads((path / META).read_text())
    if meta.get("version") not in (2, LAYOUT_VERSION):
        raise ValueError(
            f"index at {path} has layout {meta.get('version')}; rebuild it with `quorum index`"
        )
    return meta


def open_shard(directory: Path) -> tantivy.Index:
    """Open one tantivy index whose reader reloads only when told to.

    tantivy's default reader watches meta.json from a thread whose first look always reloads,
    rewriting `.tantivy-meta.lock` 0.1-4 ms after the open (measured here): an index removed at
    that moment (the training's throwaway BM25 index, in CI) failed with "Directory not empty".
    Nothing here needs the watcher: a searcher is a fixed snapshot, and the writer reloads after
    each of its commits.
    """
    index = tantivy.Index.open(str(directory))
    index.config_reader(reload_policy="Manual")
    return index


def open_layout(path: Path) -> tuple[list[tantivy.Index], dict[str, Any], int]:
    """Open an index: its tantivy shards, meta and committed rows (layout 2 upgraded first).

    FileNotFoundError when there is no index at `path`.
    """
    meta = read_meta(path)
    indexes = [open_shard(d) for d in shard_dirs(path, shard_count(meta))]
    rows = committed_rows(indexes, meta)
    if meta["version"] != LAYOUT_VERSION:
        meta = upgrade(path, meta, rows)
    return indexes, finish_swap(path, meta), rows  # a new model's vectors a crash left half in


def committed_rows(indexes: list[tantivy.Index], meta: dict[str, Any]) -> int:
    """Return the rows that belong to committed documents, settling a commit left in flight.

    A batch counts once every shard that should hold some of its rows does.
    """
    rows, pending = int(meta["rows"]), int(meta.get("pending_rows", meta["rows"]))
    if pending <= rows:
        return rows
    landed = [x for x in rows_landed(indexes, rows, pending) if x is not None]
    return pending if all(landed) else rows


def remove_index(path: Path) -> None:
    """Delete an index directory, if there is one.

    A tantivy reader opened in this process may still write its meta lock into it once (its
    watcher's first look can come before `open_shard` turns the watcher off): a removal that
    meets the file appearing mid-way tries again.
    """
    for attempt in range(3):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == 2:
                raise
            time.sleep(0.05)
