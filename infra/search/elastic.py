"""The Elasticsearch engine: BM25 over title + abstract (`text`) and MeSH, cosine over vectors.

Text is analyzed on the client exactly as the embedded engine analyzes it (`elastic_schema`),
so both engines find the same documents on any server; parsed queries compile to a small, safe
subset of the query DSL (`elastic_query`; knn over an ids filter for similarities).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout
from elasticsearch import ApiError, BadRequestError, Elasticsearch, helpers

from infra.errors import Unavailable
from infra.records import Document
from infra.search import elastic_bulk
from infra.search.base import SearchResult
from infra.search.elastic_bulk import BulkLoading
from infra.search.elastic_query import to_elasticsearch
from infra.search.elastic_schema import (
    SOURCE_FIELDS,
    checked_properties,
    from_source,
    to_source,
    vector_field_name,
)
from infra.search.elastic_vectors import HIT_FIELDS, IDS_ONLY, PAGE, VectorSearch, hit_scores
from infra.search.query import COMBINED, QueryError, parse_query
from infra.settings import INDEX_NAME, INDEX_NAME_RULE, SearchSettings
from infra.text import clip

MAX_HITS = 100_000  # search() pages at most MAX_HITS / PAGE times
MAX_ERRORS_SHOWN = 5


SEARCH = SearchSettings()
"""The search group's defaults: what an index opened without settings gets, stated there."""


class ElasticIndex(VectorSearch, BulkLoading):
    """One Elasticsearch index of PubMed documents: searched, fetched, scored and written."""

    name = "elasticsearch"

    def __init__(
        self,
        url: str,
        index: str,
        *,
        api_key: str | None = None,
        timeout_s: float = SEARCH.timeout_s,
        dims: int | None = None,
        create: bool = False,
        max_prefix_expansions: int = SEARCH.max_prefix_expansions,
        shards: int = SEARCH.elasticsearch_shards,
        replicas: int = SEARCH.elasticsearch_replicas,
        vector_index: str = SEARCH.elasticsearch_vector_index,
        knn_candidates: float = SEARCH.elasticsearch_knn_candidates,
        embedding_model: str | None = None,
        bulk_threads: int = SEARCH.elasticsearch_bulk_threads,
        bulk_docs: int = SEARCH.elasticsearch_bulk_docs,
    ):
        if not INDEX_NAME.fullmatch(index or ""):
            raise ValueError(f"index name {index!r} is not allowed. {INDEX_NAME_RULE}")
        self.url = re.sub(r"//[^/@]*@", "//", url)  # never keep credentials from the URL
        self.index = index
        self.timeout_s = timeout_s
        self.max_prefix_expansions = max_prefix_expansions
        self._secret = api_key
        self._client = Elasticsearch(
            url, api_key=api_key, request_timeout=timeout_s, max_retries=2, retry_on_timeout=True
        )
        self._mapping: dict[str, Any] | None = None  # properties, once analysis is checked
        self._meta: dict[str, Any] = {}  # the index's `_meta`, read with the properties
        self.shards, self.replicas, self.vector_index = shards, replicas, vector_index
        self.knn_candidates = knn_candidates
        self.embedding_model = embedding_model
        self.bulk_threads, self.bulk_docs = bulk_threads, bulk_docs
        self._bulk_mode = False
        self._packed: bool | None = None  # base64 vectors: servers from 9.3 take them
        if create:
            self.create(dims)

    def create(self, dims: int | None) -> None:
        """Create the index for `dims`-dimensional vectors (none when None), unless it exists."""
        with _guard(self._secret):
            self._create(dims)

    def __repr__(self) -> str:
        return f"ElasticIndex(url={self.url!r}, index={self.index!r})"

    def check_reachable(self) -> None:
        """Fail at once, naming the URL and how to start a node, when no server answers.

        NOTE: the client's own retries with back-off took 13-24 s to give up on a refused
        connection; one short, unretried request tells the same thing at once.
        """
        try:
            with _guard(self._secret):
                quick = self._client.options(
                    request_timeout=min(5.0, self.timeout_s), max_retries=0
                )
                quick.cluster.health()
        except ApiError:
            return  # it answered: reachable (what the answer means is for the real request)
        except (ConnectionError, TransportConnectionError, ConnectionTimeout) as exc:
            said = f"{exc} {getattr(exc, 'message', '')}"
            found = re.search(r"\[Errno -?\d+\][^)'\"]*|timed out", said)
            reason = found.group(0).strip() if found else type(exc).__name__
            raise Unavailable(
                f"Elasticsearch at {self.url} cannot be reached ({reason}); start a node with "
                "`python -m lab.elasticsearch_server start`, or point "
                "search.elasticsearch_url "
                "(QUORUM_SEARCH__ELASTICSEARCH_URL) at a running one"
            ) from None

    def index_names(self) -> list[str]:
        """Return the names of the server's indexes (hidden and system ones left out)."""
        with _guard(self._secret):
            found = self._client.indices.get_alias(index="*", expand_wildcards="open")
        return sorted(name for name in found if not name.startswith("."))

    @property
    def dims(self) -> int | None:
        """Return the stored vectors' dimension; None when the index stores no vectors."""
        if self._mapping is None and not self.exists():
            return None
        properties = self._properties()
        return properties.get(vector_field_name(self._meta), {}).get("dims")

    @property
    def analyzer(self) -> str:
        """Return the server-side analyzer of the searchable (pre-stemmed) fields."""
        return self._properties().get("title", {}).get("analyzer", "standard")

    def identity(self) -> str:
        """Return the index's server-assigned UUID (a re-created index gets a new one)."""
        with _guard(self._secret):
            found = self._client.indices.get_settings(index=self.index)
        return str(found[self.index]["settings"]["index"]["uuid"])

    def drop(self) -> None:
        """Delete the index (benchmarks and tests start from nothing); a missing one is fine."""
        with _guard(self._secret):
            self._client.indices.delete(index=self.index, ignore_unavailable=True)

    def exists(self) -> bool:
        """Tell whether the index exists on the server."""
        with _guard(self._secret):
            return bool(self._client.indices.exists(index=self.index))

    def validate(self, query: str) -> None:
        """Raise QueryError with the reason when `query` may not run here."""
        dsl = self.compile(query)
        self._check_analysis()
        with _guard(self._secret, query=True):
            found = self._client.indices.validate_query(index=self.index, query=dsl, explain=True)
        if not found.get("valid"):
            reasons = [e.get("error", "") for e in found.get("explanations", []) if e.get("error")]
            reason = _mask(_short("; ".join(reasons)), self._secret)
            raise QueryError(f"Elasticsearch rejects the query: {reason}")

    def compile(self, query: str) -> dict[str, Any]:
        """Parse a quorum query and compile it to query DSL (QueryError when it may not run)."""
        node = parse_query(query)
        return to_elasticsearch(
            node, max_prefix_expansions=self.max_prefix_expansions, combined=self.combined
        )

    @property
    def combined(self) -> bool:
        """Tell whether unqualified words score one title + abstract field (`text`).

        An index made before it had one scores the two fields, as it did.
        """
        return COMBINED in self._properties()

    def search(self, query: str, limit: int) -> SearchResult:
        """Return the top `limit` BM25 hits, best first, with the total match count.

        Equal scores come in Lucene's document order, which a merge still running after a write
        may change between two searches. Sorting them by PMID on the server (`_score`, then
        `pmid`) was measured and left out: the top 10,000 of 200 BioASQ questions over 101,136
        documents took 86-102 ms p50 against 66-72 ms by score alone (+25-40%; `_doc` as the
        second key cost 15 ms too: a second key takes Lucene off its score-only collector).
        """
        dsl = self.compile(query)
        self._check_analysis()
        limit = max(0, min(int(limit), MAX_HITS))
        with _guard(self._secret, query=True):
            if limit <= PAGE:
                found = self._client.search(
                    index=self.index,
                    query=dsl,
                    size=limit,
                    track_total_hits=True,
                    filter_path=HIT_FIELDS,
                    **IDS_ONLY,
                )
                return SearchResult(_total(found), hit_scores(found))
            return self._search_pages(dsl, limit)

    def _search_pages(self, dsl: dict[str, Any], limit: int) -> SearchResult:
        pit = self._client.open_point_in_time(index=self.index, keep_alive="1m")["id"]
        hits: list[tuple[str, float]] = []
        total, after = 0, None
        try:
            while len(hits) < limit:
                size = min(PAGE, limit - len(hits))
                found = self._client.search(
                    query=dsl,
                    size=size,
                    pit={"id": pit, "keep_alive": "1m"},
                    sort=[{"_score": "desc"}, {"_shard_doc": "asc"}],
                    search_after=after,
                    track_total_hits=after is None,
                    filter_path=[*HIT_FIELDS, "pit_id", "hits.hits.sort"],
                    **IDS_ONLY,
                )
                pit = found.get("pit_id", pit)
                page = found["hits"].get("hits", [])
                if after is None:
                    total = _total(found)
                hits += hit_scores(found)
                if len(page) < size:
                    break
                after = page[-1]["sort"]
        finally:
            self._client.close_point_in_time(id=pit)
        return SearchResult(total, hits)

    def fetch(self, pmids: Sequence[str]) -> list[Document]:
        """Return stored documents for these PMIDs, in order, skipping unknown ones."""
        wanted = [str(p) for p in pmids]
        if not wanted:
            return []
        self._check_analysis()
        with _guard(self._secret):
            found = self._client.mget(index=self.index, ids=wanted, source_includes=SOURCE_FIELDS)
        docs = {d["_id"]: d["_source"] for d in found["docs"] if d.get("found")}
        return [from_source(p, docs[p]) for p in wanted if p in docs]

    def has(self, pmid: str) -> bool:
        """Tell whether the index holds this PMID."""
        with _guard(self._secret):
            return bool(self._client.exists(index=self.index, id=str(pmid)))

    def count(self) -> int:
        """Return how many documents the index holds (as of the last commit)."""
        with _guard(self._secret):
            return int(self._client.count(index=self.index)["count"])

    def upsert(self, docs: Sequence[dict[str, Any]], vectors: np.ndarray | None) -> int:
        """Index documents by PMID (re-indexing replaces); ValueError names the ones that failed.

        A PMID given twice keeps its last version; the batch goes out in parallel requests.
        """
        docs = list(docs)
        self._check_analysis()
        packed = self._packs_vectors()
        if vectors is not None:
            vectors = np.asarray(vectors, dtype=np.float32)
            if self.dims is None:
                raise ValueError(f"index {self.index!r} stores no vectors; create it with dims")
            if vectors.shape != (len(docs), self.dims):
                raise ValueError(
                    f"vectors {vectors.shape} for {len(docs)} docs of {self.dims} dims"
                )
        latest = {str(doc["pmid"]): i for i, doc in enumerate(docs)}
        actions = [
            {
                "_op_type": "index",
                "_index": self.index,
                "_id": pmid,
                "_source": to_source(
                    docs[i],
                    None if vectors is None else vectors[i],
                    packed=packed,
                    field=vector_field_name(self._meta),
                ),
            }
            for pmid, i in latest.items()
        ]
        done, failed = self._send(actions)
        if failed:
            raise ValueError(
                f"{len(failed)} of {len(docs)} documents were not indexed "
                f"({done} were): {_describe(failed)}"
            )
        return done

    def delete(self, pmids: Sequence[str]) -> int:
        """Remove documents by PMID; return how many were present."""
        actions = ({"_op_type": "delete", "_index": self.index, "_id": str(p)} for p in pmids)
        done, failed = self._bulk(actions)
        failed = [f for f in failed if f.get("status") != 404]
        if failed:
            raise ValueError(f"{len(failed)} documents could not be deleted: {_describe(failed)}")
        return done

    def commit(self) -> None:
        """Make everything written so far searchable (in a bulk load: durable, seen at its end)."""
        if self._bulk_mode:
            return  # acknowledged writes are in the translog: a refresh would only add a segment
        with _guard(self._secret):
            self._client.indices.refresh(index=self.index)

    def close(self) -> None:
        """Commit, end a bulk load (its settings put back), and release the connection."""
        try:
            if self.exists():
                with _guard(self._secret):
                    if self._bulk_mode:
                        elastic_bulk.leave_bulk(self._client, self.index)
                    self._bulk_mode = False
                self.commit()
        finally:
            self._client.close()

    def _guarded(self) -> Any:
        return _guard(self._secret)

    def _bulk(self, actions: Iterator[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
        done, failed = 0, []
        client = self._client.options(request_timeout=max(self.timeout_s, 120.0))
        # 429s are retried with backoff; other per-item errors are collected, not raised.
        retries = {"max_retries": 5, "initial_backoff": 1, "max_backoff": 30}
        with _guard(self._secret):
            for ok, item in helpers.streaming_bulk(
                client, actions, raise_on_error=False, **retries
            ):
                done += ok
                failed += [] if ok else list(item.values())
        return done, failed

    def _check_analysis(self) -> None:
        """Raise ValueError unless the index holds terms of this version's analysis."""
        self._properties()

    def _properties(self) -> dict[str, Any]:
        """Return the index's field mappings; ValueError when its analysis is not this one."""
        if self._mapping is None:
            with _guard(self._secret):
                found = self._client.indices.get_mapping(index=self.index)
            mapping = next(iter(found.values()))["mappings"]
            self._mapping = checked_properties(self.index, mapping)
            self._meta = dict(mapping.get("_meta") or {})
        return self._mapping


@contextmanager
def _guard(secret: str | None, *, query: bool = False) -> Iterator[None]:
    """Mask the API key in any error; with `query`, turn the server's 400 into QueryError."""
    try:
        yield
    except Exception as exc:
        if query and isinstance(exc, BadRequestError):
            reason = _mask(_short(_reason(exc)), secret)
            raise QueryError(f"Elasticsearch rejects the query: {reason}") from None
        if secret and secret in f"{exc!s}{exc!r}":
            raise RuntimeError(_mask(f"{type(exc).__name__}: {exc!s}", secret)) from None
        raise


def _mask(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _total(found: Any) -> int:
    total = found["hits"]["total"]
    return int(total["value"] if isinstance(total, dict) else total)


def _describe(failed: list[dict[str, Any]]) -> str:
    parts = []
    for item in failed[:MAX_ERRORS_SHOWN]:
        error = item.get("error") if isinstance(item.get("error"), dict) else {}
        reason = error.get("reason") or item.get("error") or item.get("result", "failed")
        parts.append(f"{item.get('_id')} ({error.get('type', 'error')}: {_short(str(reason))})")
    more = len(failed) - MAX_ERRORS_SHOWN
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _reason(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    if isinstance(error, dict):
        causes = error.get("root_cause") or [error]
        return "; ".join(str(c.get("reason", c.get("type", ""))) for c in causes)
    return str(error or exc.message)


def _short(text: str, limit: int = 300) -> str:
    """Drop shard prefixes, Java class names and repeats from a server message; cap its length."""
    text = re.sub(r"\[[^\]]*/[^\]]*\]\s*", "", text)
    text = re.sub(r"\b(?:[a-z_]\w*\.)+[A-Z]\w*(?:Exception|Error):\s*", "", text)
    text = "; ".join(dict.fromkeys(part.strip() for part in text.split(";") if part.strip()))
    return clip(text, limit)
