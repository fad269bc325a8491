"""The embedded tantivy index: building, searching with quorum queries, fetching, vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infra.search.embedded import EmbeddedIndex
from infra.search.query import QueryError

DOCS = [
    {
        "pmid": "11",
        "title": "Aspirin prevents colorectal cancer",
        "abstract": "Daily aspirin reduced the incidence of colorectal cancer in a large cohort.",
        "year": 2010,
        "mesh": ["Aspirin", "Colorectal Neoplasms"],
    },
    {
        "pmid": "12",
        "title": "Mitochondrial dysfunction in Parkinson disease",
        "abstract": "Dopaminergic neurons show complex I deficiency.",
        "year": 2012,
        "mesh": ["Mitochondria", "Parkinson Disease"],
    },
    {
        "pmid": "13",
        "title": "Diet and tumours of the colon",
        "abstract": "Colorectal cancer risk rises with red meat; aspirin was not studied.",
        "year": 2015,
        "mesh": ["Diet", "Colonic Neoplasms"],
    },
    {
        "pmid": "14",
        "title": "Statins and cardiovascular outcomes",
        "abstract": "Statins lowered cholesterol and cardiovascular events.",
        "year": 2008,
        "mesh": ["Hydroxymethylglutaryl-CoA Reductase Inhibitors"],
    },
    {
        "pmid": "15",
        "title": "CFTR mutations in cystic fibrosis",
        "abstract": "The CFTR gene carries the F508del mutation in most patients.",
        "year": 2001,
        "mesh": ["Cystic Fibrosis"],
    },
    {
        "pmid": "16",
        "title": "Oxidative stress and aging",
        "abstract": "Reactive oxygen species from mitochondria accelerate aging.",
        "year": 2019,
        "mesh": ["Aging", "Mitochondria"],
    },
    {
        "pmid": "17",
        "title": "Screening for cancer colorectal",
        "abstract": "Screening by colonoscopy detects tumours early.",
        "year": 2020,
        "mesh": ["Mass Screening"],
    },
    {
        "pmid": "18",
        "title": "Insulin resistance in obesity",
        "abstract": "Obesity drives insulin resistance through inflammation.",
        "year": 2018,
        "mesh": ["Obesity", "Insulin Resistance"],
    },
]
PMIDS = [d["pmid"] for d in DOCS]


def unit_vectors(n: int = len(DOCS), dim: int = 4) -> np.ndarray:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(n, dim))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


VECTORS = unit_vectors()


@pytest.fixture
def idx(tmp_path: Path) -> EmbeddedIndex:
    return EmbeddedIndex.build(tmp_path / "idx", DOCS, vectors=VECTORS, embedding_model="test-4d")


def pmids(idx: EmbeddedIndex, query: str, limit: int = 10) -> set[str]:
    return {pmid for pmid, _ in idx.search(query, limit).hits}


# --- building and opening ---------------------------------------------------------------------


def test_count_is_the_number_of_documents(idx):
    assert idx.count() == len(DOCS)


def test_meta_records_documents_and_embedding_model(idx):
    assert idx.meta["embedding_model"] == "test-4d" and idx.meta["dims"] == 4
    assert idx.meta["rows"] == len(DOCS) == idx.count()


def test_reopening_the_path_sees_the_same_index(idx):
    again = EmbeddedIndex(idx.path)
    assert again.count() == len(DOCS)
    assert again.search("aspirin", 10).hits == idx.search("aspirin", 10).hits


def test_opening_a_missing_index_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        EmbeddedIndex(tmp_path / "nothing")


def test_index_without_vectors_has_no_vectors_and_no_model(tmp_path):
    idx = EmbeddedIndex.build(tmp_path / "novec", DOCS, embedding_model="ignored")
    assert idx.vectors(["11"]) is None
    assert idx.meta["embedding_model"] is None


def test_rebuilding_at_the_same_path_replaces_the_index(tmp_path):
    path = tmp_path / "idx"
    EmbeddedIndex.build(path, DOCS, vectors=VECTORS)
    rebuilt = EmbeddedIndex.build(path, DOCS[:3], vectors=VECTORS[:3])
    assert rebuilt.count() == 3
    assert EmbeddedIndex(path).count() == 3
    assert pmids(rebuilt, "statins") == set()
    assert [pmid for pmid, _ in rebuilt.search("aspirin", 10).hits].count("11") == 1


def test_rebuilding_with_the_same_docs_creates_no_duplicates(tmp_path):
    path = tmp_path / "idx"
    EmbeddedIndex.build(path, DOCS, vectors=VECTORS)
    rebuilt = EmbeddedIndex.build(path, DOCS, vectors=VECTORS)
    assert rebuilt.count() == len(DOCS)
    assert rebuilt.search("aspirin", 10).total == 2


def test_mismatched_vector_count_raises_and_leaves_no_index(tmp_path):
    path = tmp_path / "idx"
    with pytest.raises(ValueError, match="3 vectors for 8 documents"):
        EmbeddedIndex.build(path, DOCS, vectors=VECTORS[:3])
    assert not path.exists()
    with pytest.raises(FileNotFoundError):
        EmbeddedIndex(path)


def test_failed_rebuild_keeps_the_previous_index(tmp_path):
    path = tmp_path / "idx"
    EmbeddedIndex.build(path, DOCS[:2], vectors=VECTORS[:2])
    with pytest.raises(ValueError):
        EmbeddedIndex.build(path, DOCS, vectors=VECTORS[:3])
    assert EmbeddedIndex(path).count() == 2


# --- search -----------------------------------------------------------------------------------


def test_search_returns_hits_best_first_with_total(idx):
    result = idx.search("aspirin", 10)
    assert result.total == 2
    assert [pmid for pmid, _ in result.hits] == ["11", "13"]
    scores = [score for _, score in result.hits]
    assert all(isinstance(s, float) and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)


def test_limit_caps_hits_but_not_total(idx):
    result = idx.search("colorectal", 1)
    assert len(result.hits) == 1
    assert result.total == 3


def test_query_without_matches_gives_zero_total(idx):
    result = idx.search("zebrafish", 10)
    assert result.total == 0
    assert result.hits == []


def test_phrase_matches_only_adjacent_words_in_order(idx):
    assert pmids(idx, '"colorectal cancer"') == {"11", "13"}
    assert pmids(idx, "colorectal cancer") == {"11", "13", "17"}


def test_phrase_slop_allows_words_apart(idx):
    assert "17" not in pmids(idx, '"colorectal cancer"')
    assert "17" in pmids(idx, '"colorectal cancer"~2')


def test_and_requires_both_terms(idx):
    assert pmids(idx, "aspirin AND colon") == {"13"}


def test_not_excludes_documents(idx):
    assert pmids(idx, "colorectal AND NOT aspirin") == {"17"}
    assert pmids(idx, "colorectal -aspirin") == {"17"}


def test_title_field_restricts_the_search(idx):
    assert pmids(idx, "aspirin") == {"11", "13"}
    assert pmids(idx, "title:aspirin") == {"11"}
    assert pmids(idx, "aspirin[ti]") == {"11"}


def test_abstract_field_restricts_the_search(idx):
    assert pmids(idx, "abstract:mitochondria") == {"16"}


def test_mesh_field_searches_mesh_headings_only(idx):
    assert pmids(idx, "mesh:neoplasms") == {"11", "13"}
    assert pmids(idx, "neoplasms") == set()


def test_prefix_expands_to_indexed_words(idx):
    # "Mitochondrial" (12, title) and "mitochondria" (16, abstract) share the prefix.
    assert pmids(idx, "mitochond*") == {"12", "16"}
    assert pmids(idx, "title:mitochond*") == {"12"}


def test_prefix_without_expansions_returns_no_hits(idx):
    result = idx.search("zzzq*", 10)
    assert result.total == 0
    assert result.hits == []


def test_unmatched_prefix_beside_an_optional_match_is_ignored(idx):
    assert pmids(idx, "zzzq* OR aspirin") == {"11", "13"}


def test_required_prefix_without_expansions_matches_nothing(idx):
    assert idx.search("aspirin AND zzzq*", 10).total == 0


def test_and_of_unmatched_prefixes_returns_no_hits_without_error(idx):
    assert idx.search("zzzq* AND yyyq*", 10).total == 0


def test_boost_raises_a_clause_score(idx):
    plain = dict(idx.search("aspirin", 10).hits)
    boosted = dict(idx.search("aspirin^3", 10).hits)
    assert boosted["11"] == pytest.approx(3 * plain["11"], rel=1e-4)


# --- validation -------------------------------------------------------------------------------


def test_validate_accepts_a_good_query(idx):
    assert idx.validate("(aspirin OR statin*) AND title:cancer") is None


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("aspirin AND", "the query ends where a term was expected"),
        ("(aspirin", "unbalanced parenthesis"),
        ("*itis", "leading wildcards are not allowed"),
        ("NOT aspirin", "every group needs a positive term"),
    ],
)
def test_validate_rejects_bad_syntax(idx, query, reason):
    with pytest.raises(QueryError, match=reason):
        idx.validate(query)


@pytest.mark.parametrize("query", ["foo:bar", "journal:nature", "year:2010", "pmid:11"])
def test_validate_rejects_fields_that_are_not_searchable(idx, query):
    with pytest.raises(QueryError, match="is not searchable"):
        idx.validate(query)


def test_search_raises_query_error_for_a_bad_query(idx):
    with pytest.raises(QueryError):
        idx.search("/regex/", 10)


# --- fetch, vectors, has ----------------------------------------------------------------------


def test_fetch_returns_stored_documents_in_requested_order(idx):
    docs = idx.fetch(["15", "11"])
    assert [d["pmid"] for d in docs] == ["15", "11"]
    assert docs[0] == {
        "pmid": "15",
        "title": "CFTR mutations in cystic fibrosis",
        "abstract": "The CFTR gene carries the F508del mutation in most patients.",
        "year": 2001,
        "mesh": ["Cystic Fibrosis"],
        "journal": "",
    }
    assert docs[1]["mesh"] == ["Aspirin", "Colorectal Neoplasms"]


def test_fetch_skips_unknown_pmids(idx):
    assert [d["pmid"] for d in idx.fetch(["99", "12", "nope", "18"])] == ["12", "18"]


def test_fetch_of_nothing_is_empty(idx):
    assert idx.fetch([]) == []


def test_vectors_are_float32_rows_aligned_to_requested_pmids(idx):
    got = idx.vectors(["13", "11", "18"])
    assert got.dtype == np.float32
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got, VECTORS[[2, 0, 7]], atol=4e-3)


def test_vectors_of_every_pmid_match_what_was_stored(idx):
    np.testing.assert_allclose(idx.vectors(PMIDS), VECTORS, atol=4e-3)


def test_has_tells_whether_a_pmid_is_indexed(idx):
    assert idx.has("11")
    assert idx.has("18")
    assert not idx.has("99")
    assert not idx.has("")


@pytest.mark.parametrize("query", ["ASPIRIN IN COLORECTAL", "aspirin TO colorectal", "IN"])
def test_words_tantivy_reads_as_syntax_are_searched_as_words(idx, query):
    idx.validate(query)  # "Syntax Error: IN" before
    idx.search(query, 10)
    assert pmids(idx, "ASPIRIN IN COLORECTAL") == pmids(idx, "aspirin in colorectal")
