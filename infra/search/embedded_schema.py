"""The embedded engine's tantivy fields, and the document written into them for each PubMed record.

  pmid, journal        raw (one term each), stored
  title, abstract      en_stem, stored: what `title:` / `abstract:` search, and what `fetch` reads
  text                 en_stem, not stored: title and abstract as one field (two values, so a
                       phrase does not run on from the title into the abstract), which unqualified
                       query words are scored against — one BM25 field, as Elasticsearch's `text`
  mesh                 en_stem, stored: the headings joined by " ; "
  year, row            integers, fast fields (row: the document's row in the memory-mapped arrays)

An index written before `text` existed keeps working: `has_combined` tells, and its queries score
title and abstract as two fields, as before; re-indexing gives it the combined field.
"""

from __future__ import annotations

from typing import Any

import tantivy

from infra.search.query import COMBINED


def schema() -> tantivy.Schema:
    """Return the tantivy schema of a new embedded index."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("pmid", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("abstract", stored=True, tokenizer_name="en_stem")
    builder.add_text_field(COMBINED, stored=False, tokenizer_name="en_stem")
    builder.add_text_field("mesh", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("journal", stored=True, tokenizer_name="raw")
    builder.add_integer_field("year", stored=True, indexed=True, fast=True)
    builder.add_unsigned_field("row", stored=True, indexed=True, fast=True)
    return builder.build()


def has_combined(index_schema: tantivy.Schema) -> bool:
    """Tell whether an index's schema has the combined title + abstract field."""
    try:
        tantivy.Query.term_query(index_schema, COMBINED, "x")
    except ValueError:  # tantivy-py offers no field listing: "Field `text` is not defined"
        return False
    return True


def document(doc: dict[str, Any], row: int, *, combined: bool) -> tantivy.Document:
    """Return the tantivy document of a PubMed record at `row` (`combined`: fill `text` too)."""
    year = int(doc.get("year") or 0)
    if not -(2**63) <= year < 2**63:
        raise ValueError(f"PMID {doc['pmid']}: year {year} is out of range")
    title, abstract = doc.get("title") or "", doc.get("abstract") or ""
    document = tantivy.Document(
        pmid=str(doc["pmid"]),
        title=title,
        abstract=abstract,
        mesh=" ; ".join(doc.get("mesh") or []),
        journal=doc.get("journal") or "",
    )
    if combined:
        document.add_text(COMBINED, title)
        document.add_text(COMBINED, abstract)
    document.add_integer("year", year)
    document.add_unsigned("row", row)
    return document
