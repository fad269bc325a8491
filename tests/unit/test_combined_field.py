"""BM25 over one title + abstract field (`text`) in the embedded engine, and older indexes without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import tantivy

from infra.search import embedded_store
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_schema import has_combined, schema
from infra.search.query import searched_fields

DOCS = [
    {"pmid": "1", "title": "Aspirin after stroke", "abstract": ""},
    {"pmid": "2", "title": "", "abstract": "Aspirin after stroke"},
    {"pmid": "3", "title": "Statins and the heart", "abstract": "Cholesterol fell with statins."},
    {
        "pmid": "4",
        "title": "A trial of warfarin",
        "abstract": "Stroke risk fell.",
        "mesh": ["Aspirin"],
    },
    {"pmid": "5", "title": "Heart failure", "abstract": "Diuretics relieve congestion."},
]


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> EmbeddedIndex:
    return EmbeddedIndex.build(tmp_path_factory.mktemp("combined") / "index", DOCS)


def hits(index: EmbeddedIndex, query: str) -> list[tuple[str, float]]:
    return [(p, round(float(s), 5)) for p, s in index.search(query, 10).hits]


def test_a_new_index_has_the_combined_field(index):
    assert index.combined
    assert has_combined(schema())


def test_a_title_only_and_an_abstract_only_document_score_alike(index):
    # One field: the same words at the same length score the same wherever they stood. Summed
    # over two fields, each with its own statistics, they did not.
    found = dict(hits(index, "aspirin"))
    assert set(found) == {"1", "2"}  # 4 has aspirin only as a MeSH heading
    assert found["1"] == found["2"]
    assert dict(hits(index, "aspirin[tiab]")) == found
    assert dict(hits(index, "aspirin OR mesh:aspirin")).keys() == {"1", "2", "4"}


@pytest.mark.parametrize(
    ("query", "pmids"),
    [
        ("title:aspirin", {"1"}),
        ("aspirin[ti]", {"1"}),
        ("abstract:aspirin", {"2"}),
        ("aspirin[ab]", {"2"}),
        ("mesh:aspirin", {"4"}),
        ("stroke", {"1", "2", "4"}),
        ("title:stroke OR abstract:statins", {"1", "3"}),
        ("asp*", {"1", "2"}),
        ("aspirn~1", {"1", "2"}),
        ('"aspirin after stroke"', {"1", "2"}),
    ],
)
def test_fields_still_restrict(index, query, pmids):
    assert {p for p, _ in hits(index, query)} == pmids


def test_a_limit_of_zero_counts_without_hits(index):
    found = index.search("stroke", 0)
    assert found.total == 3
    assert found.hits == []


def test_a_phrase_does_not_run_from_the_title_into_the_abstract(index):
    # Title and abstract are two values of `text`: a gap of one position lies between them.
    assert hits(index, '"warfarin stroke"') == []
    assert hits(index, '"heart cholesterol"') == []


def test_only_title_and_abstract_together_become_the_combined_field():
    assert searched_fields(("title", "abstract"), True) == ("text",)
    assert searched_fields(("abstract", "title"), True) == ("text",)
    assert searched_fields(("title",), True) == ("title",)
    assert searched_fields(("mesh",), True) == ("mesh",)
    assert searched_fields(("title", "abstract"), False) == ("title", "abstract")


def _two_field_schema() -> tantivy.Schema:
    """The schema of indexes written before `text` existed."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("pmid", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("abstract", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("mesh", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("journal", stored=True, tokenizer_name="raw")
    builder.add_integer_field("year", stored=True, indexed=True, fast=True)
    builder.add_unsigned_field("row", stored=True, indexed=True, fast=True)
    return builder.build()


def test_an_index_without_the_combined_field_still_searches_and_grows(tmp_path: Path, monkeypatch):
    path = tmp_path / "old"
    with monkeypatch.context() as patched:
        patched.setattr(embedded_store, "schema", _two_field_schema)
        EmbeddedIndex.build(path, DOCS[:3])
    old = EmbeddedIndex(path)
    assert not old.combined
    assert {p for p, _ in hits(old, "aspirin")} == {"1", "2"}  # title and abstract, two fields
    assert {p for p, _ in hits(old, "title:aspirin")} == {"1"}
    # Its writer keeps writing documents of its own schema (no `text`).
    writer = embedded_store.EmbeddedWriter(path)
    writer.upsert(DOCS[3:], None)
    writer.close()
    grown = EmbeddedIndex(path)
    assert not grown.combined
    assert {p for p, _ in hits(grown, "stroke")} == {"1", "2", "4"}
