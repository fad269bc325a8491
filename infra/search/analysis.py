"""Text analysis shared by both engines: tantivy's en_stem pipeline, run in-process.

The embedded index registers it as its field tokenizer; the Elasticsearch backend runs it on the
client and indexes the space-joined stems with the `whitespace` analyzer, so both engines hold
the same terms at the same positions whatever analysis modules the server has.
"""

from __future__ import annotations

import threading

import tantivy

# Bump when the pipeline changes: Elasticsearch indexes record it and refuse other versions.
VERSION = "en_stem-v1"

_local = threading.local()


def analyzer() -> tantivy.TextAnalyzer:
    """Return a new en_stem pipeline: simple tokenizer, remove_long(40), lowercase, stem."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def analyze(text: str) -> list[str]:
    """Return the terms en_stem makes of `text`, in order (what the index holds)."""
    # One analyzer per thread: a pyo3 object may not be borrowed by two threads at once.
    if (current := getattr(_local, "analyzer", None)) is None:
        current = _local.analyzer = analyzer()
    return current.analyze(text)
