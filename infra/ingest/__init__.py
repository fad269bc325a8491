"""Ingestion: corpus files into a search index, with document vectors computed once."""

from infra.ingest.corpus import IndexMissing, ensure_index, read_jsonl

__all__ = ["IndexMissing", "ensure_index", "read_jsonl"]
