"""The Elasticsearch backend against a real single-node server (started here when it is down)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from infra.search.analysis import VERSION
from infra.search.base import SearchResult
from infra.search.elastic import PAGE, ElasticIndex
from infra.search.embedded import EmbeddedIndex
from infra.search.query import QueryError
from lab.elasticsearch_server import ServerError, ensure_running, main, status
from tests.support.servers import PORT, WORK

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-SECRET-123456"
DIMS = 16

DOCS = [
    {
        "pmid": "1",
        "title": "Aspirin and colorectal cancer prevention",
        "abstract": "Daily aspirin lowers colorectal cancer incidence in randomized trials.",
        "year": 2015,
        "mesh": ["Aspirin", "Colorectal Neoplasms"],
        "journal": "Lancet",
    },
    {
        "pmid": "2",
        "title": "Statin therapy after myocardial infarction",
        "abstract": "Statin therapy reduces mortality after myocardial infarction.",
        "year": 2014,
        "mesh": ["Myocardial Infarction"],
    },
    {
        "pmid": "3",
        "title": "Mitochondria in programmed cell death",
        "abstract": "Mitochondria release cytochrome c during apoptosis.",
        "year": 2009,
        "mesh": ["Mitochondria", "Apoptosis"],
    },
    {
        "pmid": "4",
        "title": "Mitochondrial dynamics in the lace plant",
        "abstract": "Programmed cell death forms perforations in lace plant leaves.",
        "year": 2011,
        "mesh": ["Mitochondria", "Plant Leaves"],
    },
    {
        "pmid": "5",
        "title": "Cystic fibrosis and the CFTR gene",
        "abstract": "Mutation of CFTR causes cystic fibrosis; the gene encodes a chloride channel.",
        "year": 2005,
        "mesh": ["Cystic Fibrosis"],
    },
    {
        "pmid": "6",
        "title": "Aspirin resistance in cardiology",
        "abstract": "Some patients show aspirin resistance after myocardial infarction.",
        "year": 2012,
        "mesh": ["Aspirin", "Drug Resistance"],
    },
    {
        "pmid": "7",
        "title": "Caspase-like proteases in plant cell death",
        "abstract": "Caspase-like activity accompanies cell death in plant tissue.",
        "year": 2010,
        "mesh": ["Caspases"],
    },
    {
        "pmid": "8",
        "title": "Colorectal cancer screening",
        "abstract": "Colonoscopy screening finds colorectal cancer early; death from cancer falls.",
        "year": 2018,
        "mesh": ["Colorectal Neoplasms"],
    },
    {
        "pmid": "9",
        "title": "Chloride channel gating",
        "abstract": "The chloride channel opens when ATP binds; gating is slow.",
        "year": 2001,
    },
    {
        "pmid": "10",
        "title": "Death of cells by apoptosis",
        "abstract": "Apoptosis is a programmed death of cells in development.",
        "year": 2003,
    },
    {
        "pmid": "11",
        "title": "IL-6 signaling in sepsis",
        "abstract": "Interleukin 6 signalling rises in septic patients; IL 6 blockade was studied.",
        "year": 2019,
        "mesh": ["Interleukin-6", "Sepsis"],
    },
    {
        "pmid": "12",
        "title": "Treating plants with salicylic acid",
        "abstract": "Treated leaves resisted infection; the treatment induced systemic resistance.",
        "year": 2020,
        "mesh": ["Plants", "Salicylic Acid"],
    },
]

# Both engines index and search en_stem terms (Elasticsearch's are analyzed on the client).
PARITY = [
    ("aspirin AND colorectal", {"1"}),
    ("aspirin OR statin", {"1", "2", "6"}),
    ("aspirin statin", {"1", "2", "6"}),
    ("aspirin AND NOT cancer", {"6"}),
    ("aspirin NOT cancer", {"6"}),
    ("+aspirin -resistance", {"1"}),
    ("+aspirin colorectal", {"1", "6"}),
    ("death -apoptosis", {"4", "7", "8"}),
    ("(aspirin OR statin) AND (infarction OR colorectal)", {"1", "2", "6"}),
    ('"cell death"', {"3", "4", "7"}),
    ('"programmed death"~1', {"3", "4", "10"}),
    ('"programmed death"', {"10"}),
    ("title:aspirin", {"1", "6"}),
    ("cftr[tiab] OR gating[ti]", {"5", "9"}),
    ("gene[ti] AND cystic", {"5"}),
    ("mesh:mitochondria", {"3", "4"}),
    ('mesh:"colorectal neoplasms"', {"1", "8"}),
    ("mitochond*", {"3", "4"}),
    ("mitochond* AND title:lace", {"4"}),
    ("chlorid* OR caspase-like", {"5", "7", "9"}),
    ("aspirn~1", {"1", "6"}),
    ("colorectl~1 AND screening", {"8"}),
    ("aspirin^3 OR statin", {"1", "2", "6"}),
    ("zebrafish", set()),
    # Stemming: plural and singular, -ing and -ed forms meet at one stem.
    ("plants", {"4", "7", "12"}),
    ("plant", {"4", "7", "12"}),
    ("treating", {"12"}),
    ("treats", {"12"}),
    ("resisted", {"6", "12"}),
    ("title:resistance", {"6"}),
    ("signalling AND sepsis", {"11"}),
    ("studies", {"11"}),
    # Snowball keeps these apart: mitochondrial -> mitochondri, mitochondria -> mitochondria.
    ("mitochondrial", {"4"}),
    ("mitochondria", {"3"}),
    # Punctuated terms are their words in order.
    ("IL-6", {"11"}),
    ('"IL 6"', {"11"}),
    ("interleukin-6", {"11"}),
    ("mesh:interleukin-6", {"11"}),
    ("IL6", set()),
    ("6-IL", set()),
    # Phrases across stemmed words keep their positions.
    ('"plant cells"', {"7"}),
    ('"programmed cell deaths"', {"3", "4"}),
    ('"signalling in sepsis"', {"11"}),
    ('"sepsis in signalling"', set()),
    ('"treated leaf"', set()),  # Snowball: leaves -> leav, leaf -> leaf
    ('"cells death"~1', {"3", "4", "7"}),
    ('mesh:"salicylic acids"', {"12"}),
    ('mesh:"acid plant"', set()),
    ('mesh:"plants salicylic"', {"12"}),  # as embedded: one text, headings run on
    # Prefixes expand against the indexed stems, unstemmed themselves.
    ("signal*", {"11"}),
    ("mitochondri*", {"3", "4"}),
    ("studi*", {"11"}),
    ("studies*", set()),
    ("treat* AND NOT treatment", set()),
    ("treatm*", {"12"}),
    # Fuzzy terms are stemmed, then matched within the edits.
    ("plantz~1", {"4", "7", "12"}),
    ("mitochondrai~1", {"3", "4"}),
    ("treatmnt~1", {"12"}),
    ("lace-plantz~1", {"4"}),
    ("mitochondrail~2", {"3", "4"}),
    ("signalings~1 AND septik~1", {"11"}),
]


@pytest.fixture
def make_index(es_url: str, new_name) -> Iterator:
    opened: list[ElasticIndex] = []

    def make(**kwargs) -> ElasticIndex:
        opened.append(ElasticIndex(es_url, new_name(), create=True, **kwargs))
        return opened[-1]

    yield make
    for index in opened:
        index._client.close()


def unit_vectors(n: int, dims: int = DIMS, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, dims)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def pair(es_url: str, new_name, tmp_path_factory) -> tuple[ElasticIndex, EmbeddedIndex]:
    """The same ten documents and vectors in both engines."""
    vectors = unit_vectors(len(DOCS))
    elastic = ElasticIndex(es_url, new_name(), dims=DIMS, create=True)
    assert elastic.upsert(DOCS, vectors) == len(DOCS)
    elastic.commit()
    path = tmp_path_factory.mktemp("embedded") / "index"
    embedded = EmbeddedIndex.build(path, DOCS, vectors=vectors, embedding_model="x")
    return elastic, embedded


@pytest.fixture(scope="module")
def big(es_url: str, new_name, admin) -> tuple[ElasticIndex, np.ndarray]:
    """12,000 tiny documents with 16-dim vectors, bulk indexed, in one segment.

    Its scores tie in blocks of ~1,700, and Lucene orders tied hits by document number, which a
    merge finishing in the background renumbers: with the suite on two workers (a busier node)
    one did between two searches, and their top 10s differed. One segment leaves nothing to merge.
    """
    n = 12_000
    docs = [
        {"pmid": str(500_000 + i), "title": f"sample {i}", "abstract": "cell " * (1 + i % 7)}
        for i in range(n)
    ]
    vectors = unit_vectors(n, seed=1)
    index = ElasticIndex(es_url, new_name(), dims=DIMS, create=True)
    assert index.upsert(docs, vectors) == n
    index.commit()
    admin.indices.forcemerge(index=index.index, max_num_segments=1)
    admin.indices.refresh(index=index.index)
    return index, vectors


def hit_set(index, query: str) -> set[str]:
    return {pmid for pmid, _ in index.search(query, 100).hits}


def test_mapping(pair, admin):
    elastic, _ = pair
    mappings = admin.indices.get_mapping(index=elastic.index)[elastic.index]["mappings"]
    props = mappings["properties"]
    assert mappings["_meta"] == {"quorum_analysis": VERSION} == {"quorum_analysis": "en_stem-v1"}
    assert props["pmid"] == {"type": "keyword"}
    assert props["year"] == {"type": "integer"}
    assert props["journal"]["type"] == "keyword"
    stems = {"type": "text", "analyzer": "whitespace"}
    for field in ("title", "abstract"):
        assert props[field] == stems | {"copy_to": ["text"]}
    assert props["text"] == stems | {"position_increment_gap": 1}
    assert props["mesh"] == stems
    assert props["original"] == {"type": "object", "enabled": False}
    assert props["embedding"]["dims"] == DIMS
    assert props["embedding"]["similarity"] == "cosine"
    assert elastic.analyzer == "whitespace"
    assert elastic.name == "elasticsearch"
    assert elastic.count() == len(DOCS)


def test_stems_are_indexed_and_the_text_kept(pair, admin):
    elastic, _ = pair
    source = admin.get(index=elastic.index, id="12")["_source"]
    assert source["title"] == "treat plant with salicyl acid"
    assert source["mesh"] == "plant salicyl acid"
    assert source["original"] == {
        "title": DOCS[11]["title"],
        "abstract": DOCS[11]["abstract"],
        "mesh": DOCS[11]["mesh"],
    }
    # The server's whitespace analyzer keeps the client's stems and their positions.
    tokens = admin.indices.analyze(index=elastic.index, field="title", text=source["title"])
    assert [(t["token"], t["position"]) for t in tokens["tokens"]] == [
        ("treat", 0),
        ("plant", 1),
        ("with", 2),
        ("salicyl", 3),
        ("acid", 4),
    ]


# Same analyzer, same BM25 (k1 1.2, b 0.75, idf and Lucene's length norms in both): the same
# scores where every document has the field, as title and abstract do here.
RANKED = [
    "aspirin",
    "title:aspirin",
    "cancer",
    "death",
    "plants",
    "treated OR resisted",
    "colorect*",
    '"cell death"',
    "death^2 OR cancer",
    "+plant aspirin^0.5 cell",
]


@pytest.mark.parametrize("query", RANKED)
def test_same_ranking_as_embedded(pair, query):
    elastic, embedded = pair
    want = embedded.search(query, 100).hits
    got = elastic.search(query, 100).hits
    assert len({round(score, 4) for _, score in want}) == len(want) > 1  # no ties: order is real
    assert [pmid for pmid, _ in got] == [pmid for pmid, _ in want]
    assert [score for _, score in got] == pytest.approx([score for _, score in want], rel=1e-4)


@pytest.mark.parametrize(
    ("query", "top"), [("mesh:mitochondria", "3"), ("mesh:plants OR mesh:acid", "12")]
)
def test_mesh_ranking_agrees_on_the_top_hit(pair, query, top):
    # Lucene's idf and average length count only documents with the field; tantivy counts all,
    # and documents 9 and 10 have no MeSH: scores differ a little, so only the top is asserted.
    # (In PubMed, abstracts are missing too: there, abstract scores differ the same way.)
    elastic, embedded = pair
    assert embedded.search(query, 1).hits[0][0] == elastic.search(query, 1).hits[0][0] == top


def test_sloppy_phrases_match_alike_but_score_apart(pair):
    # Lucene scores a sloppy match 1 / (1 + distance); tantivy counts every match as 1.
    elastic, embedded = pair
    query = '"programmed death"~1'
    assert hit_set(elastic, query) == hit_set(embedded, query) == {"3", "4", "10"}
    assert elastic.search(query, 1).hits[0][0] == "10"  # the exact phrase ranks first
    assert embedded.search(query, 1).hits[0][0] == "3"


@pytest.mark.parametrize("meta", [{}, {"_meta": {"quorum_analysis": "standard"}}])
def test_an_index_from_another_analysis_must_be_rebuilt(es_url, admin, new_name, meta):
    name = new_name()
    admin.indices.create(index=name, mappings={"properties": {"title": {"type": "text"}}} | meta)
    for attempt in (
        lambda index: index.search("aspirin", 10),
        lambda index: index.validate("aspirin"),
        lambda index: index.fetch(["1"]),
        lambda index: index.upsert(DOCS[:1], None),
    ):
        with pytest.raises(ValueError, match=rf"index {name!r} was built .* re-index"):
            attempt(ElasticIndex(es_url, name))
    with pytest.raises(ValueError, match="delete the index and re-index it"):
        ElasticIndex(es_url, name, create=True)
    assert admin.count(index=name)["count"] == 0


@pytest.mark.parametrize(("query", "expected"), PARITY)
def test_same_hits_as_embedded(pair, query, expected):
    elastic, embedded = pair
    assert hit_set(embedded, query) == expected
    assert hit_set(elastic, query) == expected
    assert elastic.search(query, 100).total == len(expected)


def test_hits_are_ranked(pair):
    elastic, _ = pair
    hits = elastic.search("aspirin^3 OR statin", 10).hits
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert hits[-1][0] == "2"  # the unboosted clause ranks last
    assert elastic.search("aspirin OR statin", 2).total == 3


def test_fuzzy_finds_spelling_variants(pair):
    elastic, _ = pair
    assert hit_set(elastic, "aspirn") == set()
    assert hit_set(elastic, "aspirn~1") == {"1", "6"}
    assert hit_set(elastic, "aspirn~1 AND cardiology") == {"6"}
    # Against stems: mitochondria is 1 edit away (a transposition), and so is mitochondri.
    assert hit_set(elastic, "mitochondrai~1") == {"3", "4"}
    assert hit_set(elastic, "mitochondrail~1") == set()  # 2 edits from either stem
    assert hit_set(elastic, "mitochondrail~2") == {"3", "4"}


@pytest.mark.parametrize(
    "query",
    ["", "*aspirin", "foo:aspirin", "NOT aspirin", "/asp.*/", "aspirin~3", '"unclosed', "(a OR b"],
)
def test_validate_rejects_what_the_parser_rejects(pair, query):
    elastic, _ = pair
    with pytest.raises(QueryError):
        elastic.validate(query)
    with pytest.raises(QueryError):
        elastic.search(query, 10)


class HugeBoosts(ElasticIndex):
    """Sends a boost the parser now caps, to see the server's own 400."""

    def compile(self, query: str) -> dict:
        return {"match": {"title": {"query": query, "boost": float("9" * 45)}}}


def test_validate_rejects_what_the_server_rejects(pair):
    elastic, _ = pair
    elastic.validate('aspirin AND "cell death"~2 OR mitochond*')
    with pytest.raises(QueryError, match="boosts must be between 0 and 100"):
        elastic.validate("aspirin^" + "9" * 45)  # caught by the parser, before the server
    raw = HugeBoosts(elastic.url, elastic.index)
    with pytest.raises(QueryError, match=r"Elasticsearch rejects the query: .*boost"):
        raw.validate("aspirin")
    with pytest.raises(QueryError, match=r"Elasticsearch rejects the query: .*boost"):
        raw.search("aspirin", 10)
    raw.close()


def test_fetch_keeps_order_and_skips_unknown(pair):
    elastic, _ = pair
    docs = elastic.fetch(["8", "missing", "1"])
    assert [d["pmid"] for d in docs] == ["8", "1"]
    assert docs[1] == {
        "pmid": "1",
        "title": DOCS[0]["title"],
        "abstract": DOCS[0]["abstract"],
        "year": 2015,
        "mesh": ["Aspirin", "Colorectal Neoplasms"],
        "journal": "Lancet",
    }
    assert elastic.fetch([]) == []
    assert elastic.has("3") and not elastic.has("missing")


def test_similarities_match_numpy(pair):
    elastic, embedded = pair
    query = unit_vectors(1, seed=7)[0]
    pmids = ["3", "missing", "1", "10", "3"]
    got = elastic.similarities(pmids, query * 2.5)  # cosine ignores the query's length
    stored = {d["pmid"]: v for d, v in zip(DOCS, unit_vectors(len(DOCS)), strict=True)}
    want = [float(stored[p] @ query) if p in stored else 0.0 for p in pmids]
    assert got.dtype == np.float32 and got.shape == (5,)
    np.testing.assert_allclose(got, want, atol=1e-3)
    np.testing.assert_allclose(got, embedded.similarities(pmids, query), atol=4e-3)  # int8 on disk
    assert elastic.similarities([], query).shape == (0,)


def test_similarities_none_without_vectors(make_index):
    index = make_index()
    index.upsert(DOCS[:2], None)
    index.commit()
    assert index.dims is None
    assert index.similarities(["1", "2"], unit_vectors(1)[0]) is None


def test_similarities_over_ten_thousand_ids(big):
    index, vectors = big
    query = unit_vectors(1, seed=3)[0]
    pmids = [str(500_000 + i) for i in range(0, 12_000, 1)][:10_000]
    got = index.similarities(pmids, query)
    np.testing.assert_allclose(got, vectors[:10_000] @ query, atol=1e-3)
    more = index.similarities([str(500_000 + i) for i in range(12_000)], query)  # two requests
    np.testing.assert_allclose(more, vectors @ query, atol=1e-3)


@pytest.mark.parametrize("limit", [10, PAGE, 11_000, 20_000])
def test_search_pages_past_ten_thousand(big, limit):
    index, _ = big
    result = index.search("cell", limit)
    pmids = [pmid for pmid, _ in result.hits]
    assert result.total == 12_000
    assert len(pmids) == len(set(pmids)) == min(limit, 12_000)
    scores = [score for _, score in result.hits]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert result.hits[:10] == index.search("cell", 10).hits


def test_search_counts_without_hits(big, pair):
    index, _ = big
    assert index.search("cell", 0) == SearchResult(total=12_000, hits=[])
    assert pair[0].search("zebrafish", 20_000) == SearchResult(total=0, hits=[])


def test_upsert_twice_replaces(make_index):
    index = make_index(dims=DIMS)
    vectors = unit_vectors(len(DOCS))
    index.upsert(DOCS, vectors)
    changed = [{**DOCS[0], "title": "Aspirin revisited"}, *DOCS[1:]]
    assert index.upsert(changed, vectors) == len(DOCS)
    index.commit()
    assert index.count() == len(DOCS)
    assert index.fetch(["1"])[0]["title"] == "Aspirin revisited"
    assert hit_set(index, "revisited") == {"1"}


def test_delete(make_index):
    index = make_index()
    index.upsert(DOCS, None)
    assert index.delete(["1", "2", "missing"]) == 2
    index.commit()
    assert index.count() == len(DOCS) - 2
    assert not index.has("1") and index.has("3")
    assert index.delete([]) == 0


def test_bulk_errors_name_the_failing_pmids(make_index):
    index = make_index()
    docs = [*DOCS[:3], {**DOCS[3], "pmid": "bad-1", "year": "nineteen"}, *DOCS[4:6]]
    with pytest.raises(ValueError, match=r"1 of 6 documents.*bad-1.*year") as caught:
        index.upsert(docs, None)
    assert "5 were" in str(caught.value)
    index.commit()
    assert index.count() == 5
    assert not index.has("bad-1")


def test_vectors_must_fit_the_index(make_index, pair):
    with pytest.raises(ValueError, match="stores no vectors"):
        make_index().upsert(DOCS[:1], unit_vectors(1))
    with pytest.raises(ValueError, match="vectors"):
        make_index(dims=DIMS).upsert(DOCS[:2], unit_vectors(1))
    elastic, _ = pair
    with pytest.raises(ValueError, match="holds 16-dim vectors"):
        ElasticIndex(elastic.url, elastic.index, dims=32, create=True)


@pytest.mark.parametrize("name", ["Upper", "_under", "a/b", "a" * 65, "", "x y"])
def test_index_names_are_checked(name):
    with pytest.raises(ValueError, match="index name"):
        ElasticIndex("http://127.0.0.1:9", name)


def test_missing_index(es_url, new_name):
    index = ElasticIndex(es_url, new_name())
    assert not index.exists()
    assert index.dims is None


def test_api_key_never_shows(es_url, make_index, caplog):
    caplog.set_level(logging.DEBUG)
    index = make_index(api_key=SECRET, dims=DIMS)
    assert SECRET not in repr(index) and SECRET not in str(vars(index).get("url"))
    errors: list[BaseException] = []
    for attempt in (
        lambda: HugeBoosts(es_url, index.index, api_key=SECRET).validate("aspirin"),
        lambda: index.search("*bad", 10),
        lambda: index.upsert([{**DOCS[0], "year": "nineteen"}], None),
        lambda: index.similarities(["1"], np.ones(3)),
        lambda: ElasticIndex("http://127.0.0.1:9", "x", api_key=SECRET).count(),
        lambda: ElasticIndex("http://127.0.0.1:9200", "Bad Name", api_key=SECRET),
    ):
        with pytest.raises(Exception) as caught:  # any error, as long as it is clean
            attempt()
        errors.append(caught.value)
    assert len(errors) == 6
    for error in errors:
        assert SECRET not in f"{error!s} {error!r}"
    assert SECRET not in caplog.text


def test_server_start_is_idempotent(es_url, tmp_path, capsys):
    assert ensure_running(WORK, PORT) == es_url
    url, health = status(WORK)
    assert url == es_url and health in ("green", "yellow")
    assert main(["status", "--dir", str(WORK)]) == 0
    assert main(["status", "--dir", str(tmp_path / "never-started"), "--port", str(PORT)]) == 1
    assert capsys.readouterr().out.split("\n")[:2] == [f"{es_url} {health}", f"{es_url} down"]


def test_server_refuses_a_taken_port(es_url, tmp_path):
    with pytest.raises(ServerError, match=f"port {PORT} is taken by another process"):
        ensure_running(tmp_path / "other", PORT)
    assert not (tmp_path / "other" / "downloads").exists()
