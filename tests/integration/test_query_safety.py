"""Model-written queries that try to escape: rejected or neutralised before either engine.

Each adversarial query must either be refused by the query language (both engines' validate)
or compile to Elasticsearch DSL made only of the allowed leaf queries over the allowed fields,
and then run against the real node find nothing outside the configured index. Zero may pass.
"""

from __future__ import annotations

import pytest

from infra.search.elastic import ElasticIndex
from infra.search.embedded import EmbeddedIndex
from infra.search.query import QueryError
from tests.support.data import DOCS as EMBEDDED_DOCS

ADVERSARIAL = [
    "*cancer",  # leading wildcard
    "?spirin",
    "/asp.*n/",  # regular expression
    "abstract:/.*/",
    '{"script": {"source": "System.exit(0)"}}',  # DSL smuggled in
    '{"query": {"match_all": {}}}',
    '"}}, {"script": {"source": "1"}} {"',
    "_all:aspirin",  # fields outside the allow-list
    "_index:other_index",
    "_id:1",
    "pmid:1",
    "year:[1900 TO 2030]",
    "title:aspirin AND _source:x",
    "other-index:aspirin",
    "aspirin size:100000",
    "aspirin&size=100000",
    "aspirin^1000000",  # boost out of range
    "aspirin~9",  # fuzziness beyond 2
    "(" * 40 + "aspirin" + ")" * 40,  # deep nesting
    " OR ".join(f"w{i}" for i in range(400)),  # too many clauses
    "x" * 5000,  # too long
    "NOT aspirin",  # no positive clause: would match everything
    "-aspirin -cancer",
    "aspirin\x00",
    "title:",
    "a*",  # prefix too short to be bounded
    "aspirin) OR (script:1",
]

ALLOWED_LEAVES = {"match", "match_phrase", "prefix", "fuzzy", "bool", "term", "terms"}
ALLOWED_FIELDS = {"title", "abstract", "mesh", "title.stem", "abstract.stem", "mesh.keyword"}


def keys(value):
    """Yield every key of a nested JSON value."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from keys(inner)


def leaves(dsl):
    """Yield (query kind, field) for every leaf of a compiled query."""
    if isinstance(dsl, dict):
        for kind, body in dsl.items():
            if kind == "bool":
                for clauses in body.values():
                    if isinstance(clauses, list):
                        for clause in clauses:
                            yield from leaves(clause)
            elif isinstance(body, dict):
                for field in body:
                    yield kind, field
            else:
                yield kind, None


@pytest.fixture(scope="module")
def engines(es_url, new_name, tmp_path_factory):
    elastic = ElasticIndex(es_url, new_name(), create=True)
    docs = [{k: d[k] for k in ("pmid", "title", "abstract")} for d in EMBEDDED_DOCS]
    elastic.upsert(docs, None)
    elastic.commit()
    other = ElasticIndex(es_url, new_name(), create=True)  # a neighbour that must stay unseen
    other.upsert([{"pmid": "999", "title": "aspirin secret", "abstract": "aspirin other"}], None)
    other.commit()
    embedded = EmbeddedIndex.build(tmp_path_factory.mktemp("safety") / "index", docs)
    yield elastic, embedded
    for index in (elastic, other):
        index.drop()


@pytest.mark.parametrize("query", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_query_is_rejected_or_neutralised(engines, query):
    elastic, embedded = engines
    try:
        embedded.validate(query)
    except QueryError:
        with pytest.raises(QueryError):
            elastic.validate(query)  # refused by both engines alike
        return
    elastic.validate(query)
    dsl = elastic.compile(query)
    # What the model wrote may survive as text to match ("script" the word); never as a key.
    forbidden = {"script", "query_string", "regexp", "wildcard", "_all", "_index", "size", "index"}
    assert not forbidden & set(keys(dsl)), (query, dsl)
    for kind, field in leaves(dsl):
        assert kind in ALLOWED_LEAVES, (query, kind)
        assert field is None or field.split(".")[0] in {"title", "abstract", "text", "mesh"}, (
            query,
            field,
        )
    found = elastic.search(query, 100)
    assert all(pmid != "999" for pmid, _ in found.hits)  # never the other index
    assert found.total <= len(EMBEDDED_DOCS)
    assert {p for p, _ in embedded.search(query, 100).hits} <= {d["pmid"] for d in EMBEDDED_DOCS}


def test_none_of_the_adversarial_set_reaches_an_engine_as_written():
    # The set is not trivially safe: most of it is refused outright.
    refused = 0
    for query in ADVERSARIAL:
        try:
            from infra.search.query import parse_query

            parse_query(query)
        except QueryError:
            refused += 1
    assert refused >= 15
