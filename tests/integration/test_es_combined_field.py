"""Both engines score unqualified words against one title + abstract field, the same way.

Needs the Elasticsearch node the integration suite starts (QUORUM_ES_PORT / QUORUM_ES_DIR).
"""

from __future__ import annotations

import pytest

from infra.search.elastic import ElasticIndex
from infra.search.elastic_schema import mappings
from infra.search.embedded import EmbeddedIndex

# Several documents have no title, or no abstract: with two fields, Elasticsearch computed each
# field's statistics over the documents that have it and tantivy over all, so their scores
# parted; one combined field every document has scores alike.
DOCS = [
    {"pmid": "1", "title": "Aspirin after stroke", "abstract": ""},
    {"pmid": "2", "title": "", "abstract": "Aspirin after ischaemic stroke in older patients."},
    {"pmid": "3", "title": "", "abstract": "Statins lower cholesterol; aspirin did not."},
    {"pmid": "4", "title": "Warfarin or aspirin for atrial fibrillation", "abstract": ""},
    {
        "pmid": "5",
        "title": "Stroke prevention",
        "abstract": "Anticoagulants prevent stroke in atrial fibrillation; aspirin prevents less.",
    },
    {"pmid": "6", "title": "Heart failure", "abstract": "Diuretics relieve congestion."},
    {"pmid": "7", "title": "", "abstract": "Stroke units save lives after stroke."},
]

QUERIES = [
    "aspirin",
    "stroke",
    "aspirin stroke",
    "aspirin OR fibrillation",
    "+stroke aspirin^2",
    '"atrial fibrillation"',
    "strok*",
    "stroke[tiab] NOT statins",
]


@pytest.fixture(scope="module")
def engines(es_url, new_name, tmp_path_factory):
    elastic = ElasticIndex(es_url, new_name(), create=True)
    elastic.upsert(DOCS, None)
    elastic.commit()
    embedded = EmbeddedIndex.build(tmp_path_factory.mktemp("combined") / "index", DOCS)
    yield elastic, embedded
    elastic.close()


@pytest.mark.parametrize("query", QUERIES)
def test_both_engines_rank_and_score_alike(engines, query):
    elastic, embedded = engines
    assert elastic.combined and embedded.combined
    want = embedded.search(query, 10).hits
    got = elastic.search(query, 10).hits
    assert len(want) > 1
    assert {p for p, _ in got} == {p for p, _ in want}
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-4)
    # Ties (equal scores) may come in another order; the ranking of distinct scores is the same.
    assert _untied(got) == _untied(want)


def _untied(hits: list[tuple[str, float]]) -> list[str]:
    scores = [round(score, 4) for _, score in hits]
    return [hit[0] for hit, score in zip(hits, scores, strict=True) if scores.count(score) == 1]


def test_title_and_abstract_restrict_in_both(engines):
    for engine in engines:
        assert {"1", "2", "3", "4", "5"} == {p for p, _ in engine.search("aspirin", 10).hits}
    for engine in engines:
        assert {p for p, _ in engine.search("title:aspirin", 10).hits} == {"1", "4"}
        assert {p for p, _ in engine.search("abstract:aspirin", 10).hits} == {"2", "3", "5"}


def test_an_index_mapped_before_the_combined_field_searches_two_fields(es_url, admin, new_name):
    name = new_name()
    old = mappings(None)
    old["properties"].pop("text")
    for field in ("title", "abstract"):
        old["properties"][field].pop("copy_to")
    admin.indices.create(index=name, mappings=old)
    elastic = ElasticIndex(es_url, name)
    try:
        elastic.upsert(DOCS, None)
        elastic.commit()
        assert not elastic.combined
        dsl = elastic.compile("aspirin")
        assert {next(iter(leaf["match"])) for leaf in dsl["bool"]["should"]} == {
            "title",
            "abstract",
        }
        assert {p for p, _ in elastic.search("aspirin", 10).hits} == {"1", "2", "3", "4", "5"}
    finally:
        elastic.close()
