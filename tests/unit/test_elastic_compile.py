"""to_elasticsearch: parsed queries compile to a small, safe subset of the query DSL.

Query text goes through en_stem, as the indexed text did, so leaves hold stems.
"""

from __future__ import annotations

from typing import Any

import pytest

from infra.search.elastic_query import NOTHING, to_elasticsearch
from infra.search.query import Bool, Phrase, Term, parse_query
from infra.settings import SearchSettings

EXPANSIONS = SearchSettings().max_prefix_expansions

TIAB = ("title", "abstract")


def either(*leaves: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"should": list(leaves), "minimum_should_match": 1}}


FUZZY1 = {"fuzziness": 1, "transpositions": True, "rewrite": "constant_score"}

CASES = [
    (
        Term("aspirin"),
        either(
            {"match": {"title": {"query": "aspirin"}}},
            {"match": {"abstract": {"query": "aspirin"}}},
        ),
    ),
    (Term("aspirin", ("title",)), {"match": {"title": {"query": "aspirin"}}}),
    (
        Term("aspirin", ("mesh",), boost=2.0),
        {"match": {"mesh": {"query": "aspirin", "boost": 2.0}}},
    ),
    (
        Term("mitochond", ("title",), prefix=True),
        {"prefix": {"title": {"value": "mitochond", "rewrite": "top_terms_64"}}},
    ),
    (Term("Plants", ("title",)), {"match": {"title": {"query": "plant"}}}),
    (
        Term("Mitochondria", ("title",), prefix=True),  # unstemmed, as embedded expands it
        {"prefix": {"title": {"value": "mitochondria", "rewrite": "top_terms_64"}}},
    ),
    (
        Term("aspirns", ("abstract",), fuzzy=1),
        {"fuzzy": {"abstract": {"value": "aspirn", **FUZZY1}}},
    ),
    (
        Term("lace-plants", ("abstract",), fuzzy=1, boost=2.0),
        {
            "bool": {
                "must": [
                    {"fuzzy": {"abstract": {"value": "lace", **FUZZY1, "boost": 2.0}}},
                    {"fuzzy": {"abstract": {"value": "plant", **FUZZY1, "boost": 2.0}}},
                ]
            }
        },
    ),
    (Term("IL-6", ("title",)), {"match_phrase": {"title": {"query": "il 6"}}}),
    (Term("!!!", ("title",)), NOTHING),
    (Phrase("--", ("title",)), NOTHING),
    (
        Phrase("programmed cells death", ("abstract",), slop=2),
        {"match_phrase": {"abstract": {"query": "program cell death", "slop": 2}}},
    ),
    (
        Phrase("cell death", TIAB),
        either(
            {"match_phrase": {"title": {"query": "cell death", "slop": 0}}},
            {"match_phrase": {"abstract": {"query": "cell death", "slop": 0}}},
        ),
    ),
    (
        Bool(must=(Term("a", ("title",)), Term("b", ("title",)))),
        {
            "bool": {
                "must": [
                    {"match": {"title": {"query": "a"}}},
                    {"match": {"title": {"query": "b"}}},
                ]
            }
        },
    ),
    (
        Bool(should=(Term("a", ("title",)),), must_not=(Term("b", ("title",)),)),
        {
            "bool": {
                "should": [{"match": {"title": {"query": "a"}}}],
                "must_not": [{"match": {"title": {"query": "b"}}}],
                "minimum_should_match": 1,
            }
        },
    ),
    (
        Bool(must=(Term("a", ("title",)),), should=(Term("b", ("title",)),)),
        {
            "bool": {
                "must": [{"match": {"title": {"query": "a"}}}],
                "should": [{"match": {"title": {"query": "b"}}}],
            }
        },
    ),
    (
        Bool(should=(Bool(must=(Term("a", ("mesh",)),), must_not=(Term("b", ("mesh",)),)),)),
        {
            "bool": {
                "should": [
                    {
                        "bool": {
                            "must": [{"match": {"mesh": {"query": "a"}}}],
                            "must_not": [{"match": {"mesh": {"query": "b"}}}],
                        }
                    }
                ],
                "minimum_should_match": 1,
            }
        },
    ),
]


@pytest.mark.parametrize(("node", "expected"), CASES)
def test_compiles(node, expected):
    # As for an index made before the combined field: title and abstract are two fields.
    assert to_elasticsearch(node, combined=False, max_prefix_expansions=EXPANSIONS) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("aspirin", {"match": {"text": {"query": "aspirin"}}}),
        ("aspirin[tiab]", {"match": {"text": {"query": "aspirin"}}}),
        ('"cell death"~1', {"match_phrase": {"text": {"query": "cell death", "slop": 1}}}),
        ("mitochond*", {"prefix": {"text": {"value": "mitochond", "rewrite": "top_terms_64"}}}),
        ("aspirns~1", {"fuzzy": {"text": {"value": "aspirn", **FUZZY1}}}),
        ("title:aspirin", {"match": {"title": {"query": "aspirin"}}}),
        ("aspirin[ab]", {"match": {"abstract": {"query": "aspirin"}}}),
        ("mesh:aspirin", {"match": {"mesh": {"query": "aspirin"}}}),
    ],
)
def test_unqualified_words_score_the_combined_field(query, expected):
    assert to_elasticsearch(parse_query(query), max_prefix_expansions=EXPANSIONS) == expected


def test_prefix_cap_follows_setting():
    dsl = to_elasticsearch(Term("cardio", ("title",), prefix=True), max_prefix_expansions=8)
    assert dsl["prefix"]["title"]["rewrite"] == "top_terms_8"


def test_parsed_query_keeps_and_or_not_semantics():
    dsl = to_elasticsearch(
        parse_query("(aspirin OR statin*) AND title:cancer NOT mesh:mice"),
        max_prefix_expansions=EXPANSIONS,
    )
    # Adjacent clauses are OR'ed, so the NOT excludes from the whole AND group.
    assert dsl["bool"]["minimum_should_match"] == 1
    assert dsl["bool"]["must_not"] == [{"match": {"mesh": {"query": "mice"}}}]
    either_, title = dsl["bool"]["should"][0]["bool"]["must"]
    assert either_["bool"]["minimum_should_match"] == 1
    assert [next(iter(leaf)) for leaf in either_["bool"]["should"]] == ["match", "prefix"]
    assert title == {"match": {"title": {"query": "cancer"}}}


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.mark.parametrize(
    "query",
    [
        'title:"a b"~3 OR mitochond*[tiab] AND NOT c~2',
        "script OR query_string OR _index",
        '"}} {\\"script\\": 1" AND x^3',
    ],
)
def test_only_safe_dsl(query):
    allowed = {
        "bool", "must", "should", "must_not", "minimum_should_match", "match", "match_phrase",
        "prefix", "query", "slop", "boost", "fuzzy", "fuzziness", "transpositions", "value",
        "rewrite", "match_none", "title", "abstract", "text", "mesh",
    }  # fmt: skip
    assert _keys(to_elasticsearch(parse_query(query), max_prefix_expansions=EXPANSIONS)) <= allowed
