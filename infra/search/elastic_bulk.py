"""Bulk loading into Elasticsearch: settings for the load, parallel requests, vectors added later.

While `quorum index` or `quorum embed` writes, the index runs with no replicas and no periodic
refresh (each would redo the work: replicas index every document again, refreshes make a
segment to merge later); what it had is saved in the index's `_meta` first and put back when the
load ends, so a killed load is restored by the next one. Acknowledged writes are durable without
a refresh (the translog), so a journal may record them as done.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from elasticsearch import BadRequestError, Elasticsearch, helpers

from infra.search.elastic_schema import (
    FIELD_KEY,
    MODEL_KEY,
    REEMBED_KEY,
    VECTOR_FIELD,
    mappings,
    vector_field,
    vector_field_name,
    vector_value,
)
from infra.search.unembedded import Unembedded

BULK_KEY = "quorum_bulk"
"""`_meta` key holding the settings a bulk load replaced, until it puts them back."""
MAX_REQUEST_BYTES = 16 * 1024 * 1024
RETRIES = {"max_retries": 5, "initial_backoff": 1, "max_backoff": 30}
"""429s (the cluster's queues are full) are retried with backoff, as streaming_bulk does."""


class BulkLoading:
    """The writing half of `ElasticIndex`: creation, bulk loads, and vectors added later."""

    _client: Elasticsearch
    index: str
    dims: int | None
    shards: int
    replicas: int
    vector_index: str
    embedding_model: str | None
    bulk_threads: int
    bulk_docs: int
    timeout_s: float
    _bulk_mode: bool
    _packed: bool | None
    _mapping: dict[str, Any] | None
    _meta: dict[str, Any]
    _target: str | None = None
    """The field `quorum embed` fills: the vectors' own, or another model's being computed."""

    # ElasticIndex gives exists(), commit() and _guarded() (its error guard, masking the key).

    def begin_bulk(self) -> None:
        """Load with no replicas and no periodic refresh until `close` puts them back."""
        with self._guarded():
            enter_bulk(self._client, self.index)
        self._bulk_mode = True

    def start_vectors(self, dims: int, model: str) -> None:
        """Store `dims`-dimensional vectors of `model` (an index without them gains the field).

        An index holding another model's vectors keeps searching with them while this model's
        fill a field of their own; `finish_vectors` moves searches over to it.
        """
        have = self.dims
        with self._guarded():
            stored = stored_model(self._client, self.index)
            current = vector_field_name(self._meta)
            if have is None:
                add_vectors(self._client, self.index, dims, self.vector_index, model)
                self._target = current
            elif have != dims or (stored and stored != model):
                self._target = begin_reembed(
                    self._client, self.index, dims, self.vector_index, model
                )
            else:
                self._target = current
                if not stored:
                    name_model(self._client, self.index, model)
            self._mapping = None

    def unembedded(self, batch_size: int) -> Iterator[Unembedded]:
        """Yield the documents without a vector, in PMID order, in batches."""
        field = self._fill_field()
        with self._guarded():
            for docs in unembedded(self._client, self.index, batch_size, field):
                yield Unembedded([d["pmid"] for d in docs], docs, 0)

    def count_unembedded(self) -> int:
        """Return how many documents have no vector yet."""
        field = self._fill_field()
        with self._guarded():
            self._client.indices.refresh(index=self.index)
            return count_unembedded(self._client, self.index, field)

    def set_vectors(self, pmids: Sequence[str], vectors: np.ndarray, through: int) -> None:
        """Add vectors to stored documents (`through` is the embedded engine's; unused here)."""
        packed = self._packs_vectors()
        field = self._fill_field()
        actions = [
            {
                "_op_type": "update",
                "_index": self.index,
                "_id": str(pmid),
                "doc": {field: vector_value(vector, packed=packed)},
            }
            for pmid, vector in zip(pmids, np.asarray(vectors, dtype=np.float32), strict=True)
            if np.any(vector)  # cosine rejects a zero vector: the document keeps none
        ]
        _, failed = self._send(actions)
        if failed:
            raise ValueError(f"{len(failed)} vectors were not stored: {failed[:3]}")

    def commit_vectors(self) -> None:
        """Make the vectors added so far durable (they are, once acknowledged)."""
        self.commit()  # type: ignore[attr-defined]

    def _fill_field(self) -> str:
        """Return the field `quorum embed` fills: start_vectors' choice, else the current one."""
        if self._target is None:
            self._properties()  # type: ignore[attr-defined]  # reads _meta
        return self._target or vector_field_name(self._meta)

    def vectors_model(self) -> str | None:
        """Return the model whose vectors searches use (None when the index stores none)."""
        if self.dims is None:
            return None
        with self._guarded():
            return stored_model(self._client, self.index)

    def finish_vectors(self) -> None:
        """After a whole scan: searches move to another model's vectors, if those were computed."""
        with self._guarded():
            if finish_reembed(self._client, self.index):
                self._mapping = None

    def _send(self, actions: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
        client = self._client.options(request_timeout=max(self.timeout_s, 120.0))
        with self._guarded():
            return send(client, actions, threads=self.bulk_threads, chunk_docs=self.bulk_docs)

    def _packs_vectors(self) -> bool:
        """Tell whether the server takes base64 vectors (9.3+): less JSON to build and parse."""
        if self._packed is None:
            # Every node must take them (the oldest decides); GET / may be closed to clients.
            with self._guarded():
                found = self._client.nodes.info(filter_path="nodes.*.version")
            versions = [
                tuple(int(p) for p in re.findall(r"\d+", str(node["version"]))[:2])
                for node in found.get("nodes", {}).values()
            ]
            self._packed = bool(versions) and min(versions) >= (9, 3)
        return self._packed

    def _create(self, dims: int | None) -> None:
        if self.exists():
            have = self.dims
            if dims is not None and have != dims:
                stored = f"{have}-dim vectors" if have else "no vectors"
                raise ValueError(f"index {self.index!r} holds {stored}; this run writes {dims}")
            return
        try:
            self._client.indices.create(
                index=self.index,
                settings={"number_of_shards": self.shards, "number_of_replicas": self.replicas},
                mappings=mappings(dims, index_type=self.vector_index, model=self.embedding_model),
            )
        except BadRequestError as exc:
            if exc.message != "resource_already_exists_exception":
                raise
        self._mapping = None


def enter_bulk(client: Elasticsearch, index: str) -> None:
    """Turn replicas and periodic refresh off, saving what they were (once) in `_meta`."""
    meta = _meta(client, index)
    if BULK_KEY not in meta:  # a killed load left its saved settings: they are the real ones
        found = client.indices.get_settings(index=index, flat_settings=True)[index]["settings"]
        saved = {
            "index.refresh_interval": found.get("index.refresh_interval"),
            "index.number_of_replicas": found.get("index.number_of_replicas", "1"),
        }
        client.indices.put_mapping(index=index, meta=meta | {BULK_KEY: saved})
    client.indices.put_settings(
        index=index,
        settings={"index.refresh_interval": "-1", "index.number_of_replicas": 0},
    )


def leave_bulk(client: Elasticsearch, index: str) -> None:
    """Put back the settings `enter_bulk` saved, refresh, and forget them."""
    meta = _meta(client, index)
    saved = meta.pop(BULK_KEY, None)
    if saved is None:
        return
    client.indices.put_settings(index=index, settings=saved)  # None resets to the default
    client.indices.put_mapping(index=index, meta=meta)
    client.indices.refresh(index=index)


def send(
    client: Elasticsearch, actions: list[dict[str, Any]], *, threads: int, chunk_docs: int
) -> tuple[int, list[dict[str, Any]]]:
    """Send bulk actions in parallel requests; return how many succeeded and the failed items.

    Memory stays bounded: the actions are the caller's batch, and at most `threads` requests
    (each ≤ `chunk_docs` documents and 16 MB) are built at a time. Actions must not repeat an
    `_id`: parallel requests do not keep their order.
    """
    if not actions:
        return 0, []
    # Split a batch over every thread even when it is smaller than threads x chunk_docs.
    chunk = max(1, min(chunk_docs, math.ceil(len(actions) / max(1, threads))))
    by_id = {action["_id"]: action for action in actions}
    done, failed, busy = 0, [], []
    results = helpers.parallel_bulk(
        client,
        actions,
        thread_count=threads,
        chunk_size=chunk,
        max_chunk_bytes=MAX_REQUEST_BYTES,
        queue_size=threads,
        raise_on_error=False,
        raise_on_exception=False,
    )
    for ok, item in results:
        outcome = next(iter(item.values()))
        if ok:
            done += 1
        elif outcome.get("status") == 429:
            busy.append(by_id[outcome["_id"]])
        else:
            failed.append(outcome)
    if busy:  # parallel_bulk does not retry: streaming_bulk does, with backoff
        for ok, item in helpers.streaming_bulk(
            client, busy, raise_on_error=False, max_chunk_bytes=MAX_REQUEST_BYTES, **RETRIES
        ):
            done += ok
            failed += [] if ok else list(item.values())
    return done, failed


def add_vectors(client: Elasticsearch, index: str, dims: int, index_type: str, model: str) -> None:
    """Give an index without vectors its `embedding` field, naming the model that fills it."""
    client.indices.put_mapping(
        index=index,
        properties={"embedding": vector_field(dims, index_type)},
        meta=_meta(client, index) | {MODEL_KEY: model},
    )


def stored_model(client: Elasticsearch, index: str) -> str | None:
    """Return the model whose vectors the index holds, as recorded in its `_meta`."""
    return _meta(client, index).get(MODEL_KEY)


def name_model(client: Elasticsearch, index: str, model: str) -> None:
    """Record the model of an index's vectors (one made before the model was recorded)."""
    client.indices.put_mapping(index=index, meta=_meta(client, index) | {MODEL_KEY: model})


def begin_reembed(client: Elasticsearch, index: str, dims: int, index_type: str, model: str) -> str:
    """Give another model's vectors a field of their own (or resume filling it); return it.

    The field of an abandoned earlier attempt for a third model stays in the mapping (fields
    cannot be removed) and a new name is taken.
    """
    meta = _meta(client, index)
    state = meta.get(REEMBED_KEY) or {}
    if state.get("model") == model and int(state.get("dims", 0)) == dims:
        return str(state["field"])
    taken = set(
        next(iter(client.indices.get_mapping(index=index).values()))["mappings"].get(
            "properties", {}
        )
    )
    n = 2
    while f"{VECTOR_FIELD}_{n}" in taken:
        n += 1
    field = f"{VECTOR_FIELD}_{n}"
    meta[REEMBED_KEY] = {"field": field, "model": model, "dims": dims}
    client.indices.put_mapping(
        index=index, properties={field: vector_field(dims, index_type)}, meta=meta
    )
    return field


def finish_reembed(client: Elasticsearch, index: str) -> bool:
    """Name the re-embedded field and its model as the index's vectors; False if none."""
    meta = _meta(client, index)
    state = meta.pop(REEMBED_KEY, None)
    if not state:
        return False
    meta |= {FIELD_KEY: state["field"], MODEL_KEY: state["model"]}
    client.indices.put_mapping(index=index, meta=meta)
    return True


def count_unembedded(client: Elasticsearch, index: str, field: str = VECTOR_FIELD) -> int:
    """Return how many documents have no vector yet (as of the last refresh)."""
    return int(client.count(index=index, query=_unembedded(field))["count"])


def unembedded(
    client: Elasticsearch, index: str, batch_size: int, field: str = VECTOR_FIELD
) -> Iterator[list[dict]]:
    """Yield the documents without a vector, in PMID order, as of now, in batches.

    A refresh first makes every acknowledged vector visible (an earlier run's included); a
    point in time then keeps the scan steady while this run adds vectors.
    """
    client.indices.refresh(index=index)
    pit = client.open_point_in_time(index=index, keep_alive="5m")["id"]
    after = None
    try:
        while True:
            found = client.search(
                query=_unembedded(field),
                size=batch_size,
                pit={"id": pit, "keep_alive": "5m"},
                sort=[{"pmid": "asc"}],
                search_after=after,
                source_includes=["original.title", "original.abstract"],
                track_total_hits=False,
            )
            pit = found.get("pit_id", pit)
            page = found["hits"]["hits"]
            docs = []
            for hit in page:
                original = hit["_source"].get("original") or {}
                title, abstract = original.get("title") or "", original.get("abstract") or ""
                if title or abstract:  # no text, no vector: never asked for one
                    docs.append({"pmid": hit["_id"], "title": title, "abstract": abstract})
            if docs:
                yield docs
            if len(page) < batch_size:
                return
            after = page[-1]["sort"]
    finally:
        client.close_point_in_time(id=pit)


def _unembedded(field: str) -> dict[str, Any]:
    return {"bool": {"must_not": [{"exists": {"field": field}}]}}


def _meta(client: Elasticsearch, index: str) -> dict[str, Any]:
    found = client.indices.get_mapping(index=index)
    return dict(next(iter(found.values()))["mappings"].get("_meta") or {})
