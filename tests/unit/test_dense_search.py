"""The embedded engine's dense first stage: exact nearest neighbours over the stored vectors."""

import numpy as np
import pytest

import infra.search.embedded_vectors as embedded_vectors
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_layout import quantize
from infra.search.embedded_store import EmbeddedWriter


def doc(pmid):
    return {"pmid": pmid, "title": f"title {pmid}", "abstract": f"text {pmid}", "year": 2020}


def unit(n, dims=8, seed=0):
    vecs = np.random.default_rng(seed).normal(size=(n, dims)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def brute_force(vectors, pmids, query, k):
    quantized, scales = quantize(vectors)  # what the index stores
    scores = (quantized.astype(np.float32) @ query) * scales
    order = np.argsort(-scores, kind="stable")[:k]
    return [pmids[i] for i in order]


def test_nearest_is_the_exact_top_k_across_blocks(tmp_path, monkeypatch):
    vectors = unit(300)
    pmids = [str(1000 + i) for i in range(300)]
    index = EmbeddedIndex.build(
        tmp_path / "i", [doc(p) for p in pmids], vectors=vectors, embedding_model="m"
    )
    # Small blocks, so the scan's merging of per-block winners is what is tested.
    monkeypatch.setattr(embedded_vectors, "BLOCK", 7)
    for seed in range(5):
        query = unit(1, seed=100 + seed)[0]
        found = index.nearest(query, 25)
        assert [p for p, _ in found] == brute_force(vectors, pmids, query, 25)
        scores = [s for _, s in found]
        assert scores == sorted(scores, reverse=True)
        assert np.allclose(scores, index.similarities([p for p, _ in found], query), atol=1e-6)


def test_a_stored_vector_finds_its_own_document_first(tmp_path):
    vectors = unit(50)
    pmids = [str(i) for i in range(50)]
    index = EmbeddedIndex.build(
        tmp_path / "i", [doc(p) for p in pmids], vectors=vectors, embedding_model="m"
    )
    for row in (0, 17, 49):
        best, score = index.nearest(vectors[row], 3)[0]
        assert best == pmids[row] and score == pytest.approx(1.0, abs=4e-3)
    assert len(index.nearest(vectors[0], 500)) == 50
    assert index.nearest(vectors[0], 0) == []


def test_reindexed_and_deleted_documents_are_never_returned_twice_or_at_all(tmp_path):
    vectors = unit(20)
    writer = EmbeddedWriter(tmp_path / "i", dims=8, embedding_model="m")
    writer.upsert([doc(str(i)) for i in range(20)], vectors)
    writer.commit()
    # PMID 3 gets a new vector far from its old one; PMID 5 is deleted.
    writer.upsert([doc("3")], -vectors[3:4])
    writer.delete(["5"])
    writer.close()
    index = EmbeddedIndex(tmp_path / "i")
    near_old_3 = [p for p, _ in index.nearest(vectors[3], 20)]
    assert near_old_3[-1] == "3"  # its live vector points the other way: last
    assert len(near_old_3) == len(set(near_old_3)) == 19
    assert "5" not in [p for p, _ in index.nearest(vectors[5], 20)]
    assert index.nearest(-vectors[3], 1)[0][0] == "3"


def test_an_index_without_vectors_has_no_dense_stage(tmp_path):
    index = EmbeddedIndex.build(tmp_path / "i", [doc("1"), doc("2")])
    assert index.nearest(unit(1)[0], 5) == []


def test_a_vector_of_the_wrong_dimension_is_refused(tmp_path):
    index = EmbeddedIndex.build(tmp_path / "i", [doc("1")], vectors=unit(1), embedding_model="m")
    with pytest.raises(ValueError, match="4 dims; the index has 8"):
        index.nearest(unit(1, dims=4)[0], 1)


def test_vectors_of_the_latest_hits_are_the_ones_the_lookup_gives(tmp_path):
    """similarities and vectors take the rows of the latest search's hits from the search itself;
    the answer is the lookup's, for hits, for PMIDs outside them and for unknown ones."""
    vectors = unit(120)
    docs = [doc(str(2000 + i)) | {"abstract": "common" if i % 3 else "rare"} for i in range(120)]
    index = EmbeddedIndex.build(tmp_path / "i", docs, vectors=vectors, embedding_model="m")
    fresh = EmbeddedIndex(tmp_path / "i")  # never searched: every row from the lookup
    hits = index.search("rare", 100).pmids
    assert len(hits) == 40 and index._recent is not None
    asked = [*hits[::-1], "2001", "nope", hits[0]]  # reordered, one outside, one unknown, repeat
    query = unit(1, seed=7)[0]
    assert np.array_equal(index.similarities(asked, query), fresh.similarities(asked, query))
    assert index.similarities(asked, query)[-3] != 0 and index.similarities(asked, query)[-2] == 0
    assert np.array_equal(index.vectors(hits), fresh.vectors(hits))
    with pytest.raises(KeyError):
        index.vectors(["nope"])
