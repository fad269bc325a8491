"""Corpus files as one stream of events: ("upsert", document) or ("delete", pmid)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infra.errors import UserError
from infra.pubmed.xml import iter_pubmed_articles
from infra.search.corpus import read_jsonl

SUFFIXES = (".jsonl", ".jsonl.gz", ".xml", ".xml.gz")
MAX_RECORD_CHARS = 1_000_000
"""Records longer than this are skipped and named: the longest PubMed abstracts run to some
20,000 characters, while one 50 MB record took 10 GB to index and ask over."""
Event = tuple[str, Any]
PROLOG_BYTES = 1 << 16
"""How much of an XML file is read to check its prolog."""


class SourceError(UserError):
    """A corpus file that cannot be read, with the path and what is wrong."""


def kind(path: Path) -> str:
    """Return 'jsonl' or 'xml' for a supported file name, else raise SourceError."""
    name = path.name.lower()
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return suffix.split(".")[1]
    raise SourceError(f"{path}: unsupported file type (expected {', '.join(SUFFIXES)})")


def check(path: Path) -> None:
    """Fail early, before any model loads, on a source that cannot be what it claims.

    Missing, unreadable, falsely gzipped, XML declaring entities, or JSONL whose first lines
    are not UTF-8 JSON documents: each named with its file (and line).
    """
    kind(path)
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror})") from None
    if path.name.lower().endswith(".gz") and head != b"\x1f\x8b":
        raise SourceError(f"{path}: not a gzip file")
    if kind(path) == "xml":
        _check_prolog(path)
    else:
        _check_head(path)


HEAD_LINES = 1000
"""Lines of a JSONL file read before any model loads: a file of the wrong kind (CSV, one JSON
array, another encoding) shows in its first lines; later lines are checked as they are indexed."""


def _check_head(path: Path) -> None:
    """Refuse a JSONL file whose first lines are not UTF-8 JSON documents, naming file and line."""
    try:
        for _ in read_jsonl(path, max_chars=MAX_RECORD_CHARS, lines=HEAD_LINES):
            pass
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise SourceError(f"{path}: cannot read ({exc})") from None
    except ValueError as exc:  # the line's own problem, already naming file and line
        raise SourceError(str(exc)) from None


def _check_prolog(path: Path) -> None:
    """Refuse XML that declares entities (XXE, billion laughs) before anything loads.

    PubMed's files name their DTD but declare no entity; expat refuses these anyway, but only
    once parsing starts, after the embedding model loaded.
    """
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(PROLOG_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError(f"{path}: cannot read ({exc})") from None
    if b"<!ENTITY" in head.split(b"<PubmedArticleSet", 1)[0].upper():
        raise SourceError(f"{path}: the XML declares entities, which PubMed files never do")


def events(path: Path, *, max_record_chars: int = MAX_RECORD_CHARS) -> Iterator[Event]:
    """Yield the file's events in order: ("upsert", doc), ("delete", pmid), ("skip", why).

    Malformed content raises SourceError naming the place; a record over `max_record_chars`, or
    a PubMed article without a PMID, is skipped with the reason.
    """
    try:
        if kind(path) == "jsonl":
            for doc in read_jsonl(path, max_chars=max_record_chars):
                if isinstance(doc, str):
                    yield "skip", doc
                else:
                    yield _sized(normalize(doc), path, max_record_chars)
        else:
            for event, value in iter_pubmed_articles(path):
                if event == "article":
                    yield _sized(normalize(value), path, max_record_chars)
                else:
                    yield event, str(value)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: {type(exc).__name__}: {exc}") from None
    except ValueError as exc:
        message = str(exc)
        raise SourceError(message if str(path) in message else f"{path}: {message}") from None


def _sized(doc: dict[str, Any], path: Path, limit: int = MAX_RECORD_CHARS) -> Event:
    size = len(doc["title"]) + len(doc["abstract"]) + sum(map(len, doc["mesh"]))
    if size > limit:
        return (
            "skip",
            f"{path}: PMID {doc['pmid']}: {size:,} characters, over the limit of {limit:,}",
        )
    return "upsert", doc


def normalize(doc: dict[str, Any]) -> dict[str, Any]:
    """Keep the fields an index stores, with their types checked."""
    pmid = str(doc.get("pmid", "")).strip()
    if not pmid.isdigit():
        raise ValueError(f"PMID {pmid!r} is not a number")
    year = doc.get("year")
    try:
        year = int(year) if year not in (None, "") else None
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"PMID {pmid}: year {year!r} is not a number") from None
    if year is not None and not 0 <= year <= 9999:
        raise ValueError(f"PMID {pmid}: year {year} is not a plausible year")
    mesh = doc.get("mesh") or []
    if not isinstance(mesh, list):
        raise ValueError(f"PMID {pmid}: mesh must be a list of strings")
    return {
        "pmid": pmid,
        "title": str(doc.get("title") or ""),
        "abstract": str(doc.get("abstract") or ""),
        "year": year,
        "mesh": [str(m) for m in mesh],
        "journal": str(doc.get("journal") or ""),
    }
