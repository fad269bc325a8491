"""The embedded engine's writer: idempotent by PMID, durable at commit, recovering from a crash."""

import json

import numpy as np
import pytest

from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_store import META, PMIDS, VECTORS, EmbeddedWriter


def doc(pmid, text):
    return {"pmid": pmid, "title": f"title {pmid}", "abstract": text, "year": 2020}


def unit(n, dims=4, seed=0):
    vecs = np.random.default_rng(seed).normal(size=(n, dims)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_upsert_twice_keeps_one_document_with_the_new_text(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", dims=4, embedding_model="m")
    w.upsert([doc("1", "aspirin trial"), doc("2", "statin trial")], unit(2))
    w.commit()
    w.upsert([doc("1", "ibuprofen trial")], unit(1, seed=1))
    w.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 2
    assert idx.search("aspirin", 10).total == 0
    assert [p for p, _ in idx.search("ibuprofen", 10).hits] == ["1"]
    assert idx.fetch(["1"])[0]["abstract"] == "ibuprofen trial"
    assert np.allclose(idx.vectors(["1"])[0], unit(1, seed=1)[0], atol=1e-3)


def test_a_pmid_repeated_within_one_batch_is_stored_once(tmp_path):
    w = EmbeddedWriter(tmp_path / "i")
    w.upsert([doc("1", "first"), doc("1", "second")], None)
    w.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 1 and idx.fetch(["1"])[0]["abstract"] == "second"


def test_delete_reports_presence(tmp_path):
    w = EmbeddedWriter(tmp_path / "i")
    w.upsert([doc("1", "a b"), doc("2", "c d")], None)
    w.commit()
    assert w.delete(["2", "3"]) == 1
    w.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 1 and not idx.has("2") and idx.has("1")


def test_uncommitted_rows_are_cut_off_on_reopen(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", dims=4)
    w.upsert([doc("1", "kept")], unit(1))
    w.commit()
    w.upsert([doc("2", "lost")], unit(1, seed=2))
    w._pmids.flush()
    w._vectors.flush()  # the rows reached the disk, the tantivy commit never happened
    del w
    again = EmbeddedWriter(tmp_path / "i", dims=4)
    assert (tmp_path / "i" / PMIDS).read_text() == "1\n"
    assert (tmp_path / "i" / VECTORS).stat().st_size == 4 * 2
    again.upsert([doc("3", "next")], unit(1, seed=3))
    again.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 2 and idx.fetch(["3"])[0]["abstract"] == "next"
    assert np.allclose(idx.vectors(["3"])[0], unit(1, seed=3)[0], atol=1e-3)


def test_a_commit_that_landed_before_meta_was_updated_is_kept(tmp_path):
    w = EmbeddedWriter(tmp_path / "i")
    w.upsert([doc("1", "a")], None)
    w.close()
    meta = json.loads((tmp_path / "i" / META).read_text())
    meta["rows"] = 0  # as if the process died between tantivy's commit and the meta update
    meta["pending_rows"] = 1
    (tmp_path / "i" / META).write_text(json.dumps(meta))
    idx = EmbeddedIndex(tmp_path / "i")
    assert [p for p, _ in idx.search("a", 5).hits] == ["1"]
    EmbeddedWriter(tmp_path / "i").close()
    assert json.loads((tmp_path / "i" / META).read_text())["rows"] == 1


def test_vectors_are_required_when_the_index_stores_them(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", dims=4)
    with pytest.raises(ValueError, match="4-dimensional vectors"):
        w.upsert([doc("1", "a")], None)


def test_fuzzy_term_finds_a_misspelling(tmp_path):
    idx = EmbeddedIndex.build(tmp_path / "i", [doc("1", "mitochondria swell"), doc("2", "nuclei")])
    assert [p for p, _ in idx.search("mitochondira~2", 5).hits] == ["1"]
    assert idx.search("mitochondira", 5).total == 0


def test_similarities_are_dot_products_and_zero_for_unknown(tmp_path):
    vecs = unit(2)
    idx = EmbeddedIndex.build(
        tmp_path / "i", [doc("1", "a"), doc("2", "b")], vectors=vecs, embedding_model="m"
    )
    q = unit(1, seed=9)[0]
    sims = idx.similarities(["2", "x", "1"], q)
    assert sims.dtype == np.float32
    assert np.allclose(sims, [vecs[1] @ q, 0.0, vecs[0] @ q], atol=2e-3)
    assert EmbeddedIndex.build(tmp_path / "j", [doc("1", "a")]).similarities(["1"], q) is None
