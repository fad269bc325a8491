"""Ingestion: corpus files into a search index, with document vectors computed once."""
