"""The dense first stage on a real Elasticsearch node: exact, and the same as the embedded engine."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.runtime import Runtime

from infra.search.elastic import ElasticIndex
from infra.search.embedded import EmbeddedIndex
from nodes.rerank import rerank
from tests.support.data import DOCS

DIMS = 16


def unit(n: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, DIMS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def engines(es_url: str, new_name, tmp_path_factory) -> tuple[ElasticIndex, EmbeddedIndex]:
    """The same 200 documents and vectors in both engines."""
    docs = [{"pmid": str(7000 + i), "title": f"doc {i}", "abstract": "cell"} for i in range(200)]
    vectors = unit(len(docs))
    elastic = ElasticIndex(es_url, new_name(), dims=DIMS, create=True)
    assert elastic.upsert(docs, vectors) == len(docs)
    elastic.commit()
    path = tmp_path_factory.mktemp("dense") / "index"
    return elastic, EmbeddedIndex.build(path, docs, vectors=vectors, embedding_model="x")


def test_both_engines_return_the_exact_nearest_documents(engines):
    elastic, embedded = engines
    vectors = unit(200)
    for seed in range(3):
        query = unit(1, seed=50 + seed)[0]
        exact = [str(7000 + i) for i in np.argsort(-(vectors @ query), kind="stable")[:20]]
        from_es, from_disk = elastic.nearest(query, 20), embedded.nearest(query, 20)
        assert [p for p, _ in from_es] == exact
        # int8 (a scale per row) on disk, float32 in the cluster: the k-th best cosines agree to
        # that precision (near-ties may swap places, so positions are compared by score).
        assert np.allclose([s for _, s in from_es], [s for _, s in from_disk], atol=4e-3)
        assert len({p for p, _ in from_es} & {p for p, _ in from_disk}) >= 18


def test_nearest_scores_are_cosines_as_similarities_gives_them(engines):
    elastic, _ = engines
    query = unit(1, seed=9)[0]
    found = elastic.nearest(query, 10)
    assert len(found) == 10
    assert np.allclose(
        [s for _, s in found], elastic.similarities([p for p, _ in found], query), atol=1e-5
    )


def test_a_deleted_document_is_not_a_neighbour(es_url: str, new_name):
    vectors = unit(5, seed=3)
    index = ElasticIndex(es_url, new_name(), dims=DIMS, create=True)
    index.upsert([{"pmid": str(i), "title": "t", "abstract": "a"} for i in range(5)], vectors)
    index.delete(["2"])
    index.commit()
    assert [p for p, _ in index.nearest(vectors[2], 5)] != [] and "2" not in dict(
        index.nearest(vectors[2], 5)
    )
    assert index.nearest(vectors[4], 1)[0][0] == "4"


def test_an_index_without_vectors_has_no_dense_stage(es_url: str, new_name):
    index = ElasticIndex(es_url, new_name(), dims=None, create=True)
    index.upsert([{"pmid": "1", "title": "t", "abstract": "a"}], None)
    index.commit()
    assert index.nearest(unit(1)[0], 5) == []


async def test_rerank_fuses_the_same_dense_candidates_on_both_engines(
    es_url: str, new_name, make_context, settings, index, embedder
):
    vectors = embedder.embed_documents([f"{d['title']}. {d['abstract']}" for d in DOCS])
    elastic = ElasticIndex(es_url, new_name(), dims=embedder.dim, create=True)
    elastic.upsert(DOCS, vectors)
    elastic.commit()
    dense = settings.model_copy(
        update={"search": settings.search.model_copy(update={"dense_candidates": 4})}
    )
    state = {"question": "mitochondria in lace plant cell death", "candidates": [("107", 3.0)]}
    on_disk = await rerank(state, Runtime(context=make_context(settings_=dense)))
    ctx = make_context(settings_=dense)
    ctx.search = elastic
    in_cluster = await rerank(state, Runtime(context=ctx))
    assert on_disk["first_stage"] == in_cluster["first_stage"]
    assert on_disk["first_stage"]["dense_only"] == 4
    assert [p for p, _ in on_disk["ranked"]] == [p for p, _ in in_cluster["ranked"]]


def test_a_quantized_graph_finds_the_nearest_and_gathers_the_candidates_asked(
    es_url: str, new_name
):
    """search.elasticsearch_knn_candidates reaches the graph: more candidates, more of the exact
    top 10 (int8 codes and an HNSW graph; bbq's figures on real vectors: `bench dense`)."""
    dims, n = 128, 5000
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(n, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = [{"pmid": str(i), "title": "t", "abstract": "a"} for i in range(n)]
    name = new_name()
    index = ElasticIndex(es_url, name, dims=dims, create=True, vector_index="int8_hnsw")
    index.upsert(docs, vectors)
    index.commit()
    queries = rng.normal(size=(100, dims)).astype(np.float32)
    found = {}
    for factor in (1.0, 50.0):
        asked = ElasticIndex(es_url, name, knn_candidates=factor)
        kept = []
        for query in queries:
            exact = {str(i) for i in np.argsort(-(vectors @ query))[:10]}
            kept.append(len(exact & {p for p, _ in asked.nearest(query, 10)}) / 10)
        found[factor] = float(np.mean(kept))
    assert found[50.0] >= 0.9  # 500 candidates of 5,000: close to the exact answer
    assert found[1.0] < found[50.0] - 0.05  # the control: 10 candidates miss more of it
