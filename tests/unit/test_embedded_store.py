"""The embedded engine's writer: idempotent by PMID, durable at commit, recovering from a crash."""

import json
import shutil
import time

import numpy as np
import pytest

from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_layout import SCALES, VECTORS, pmids_file, quantize
from infra.search.embedded_open import open_shard, remove_index
from infra.search.embedded_shards import shard_dirs
from infra.search.embedded_store import META, EmbeddedWriter


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
    assert np.allclose(idx.vectors(["1"])[0], unit(1, seed=1)[0], atol=4e-3)  # int8: within 1/254


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
    for fh in w._files():
        fh.flush()  # the rows reached the disk, the tantivy commit never happened
    del w
    again = EmbeddedWriter(tmp_path / "i", dims=4)
    assert (tmp_path / "i" / pmids_file(10)).read_bytes() == b"1".ljust(10, b"\0")
    assert (tmp_path / "i" / VECTORS).stat().st_size == 4
    assert (tmp_path / "i" / SCALES).stat().st_size == 4
    again.upsert([doc("3", "next")], unit(1, seed=3))
    again.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 2 and idx.fetch(["3"])[0]["abstract"] == "next"
    assert np.allclose(idx.vectors(["3"])[0], unit(1, seed=3)[0], atol=4e-3)  # int8: within 1/254


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


def test_int8_vectors_keep_cosines_within_their_rounding(tmp_path):
    vecs = unit(200, dims=384, seed=4)
    quantized, scales = quantize(vecs)
    assert quantized.dtype == np.int8 and scales.dtype == np.float32
    error = np.abs(quantized * scales[:, None] - vecs)
    assert (error <= scales[:, None] / 2 + 1e-7).all()
    assert quantize(np.zeros((1, 3)))[1][0] == 0  # a zero row: scale 0, "no vector yet"
    query = unit(1, dims=384, seed=5)[0]
    pmids = [str(i) for i in range(200)]
    idx = EmbeddedIndex.build(
        tmp_path / "i", [doc(p, "x") for p in pmids], vectors=vecs, embedding_model="m"
    )
    assert np.abs(idx.similarities(pmids, query) - vecs @ query).max() < 2e-3


def test_a_longer_pmid_widens_the_row_file_and_every_pmid_is_still_found(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", dims=4, embedding_model="m")
    w.upsert([doc("1", "alpha"), doc("22", "beta")], unit(2))
    w.commit()
    long = "doi:10.1016/j.cell.2020.01.001"
    w.upsert([doc(long, "gamma")], unit(1, seed=3))
    w.close()
    assert not (tmp_path / "i" / pmids_file(10)).exists()
    idx = EmbeddedIndex(tmp_path / "i")
    assert {p for p, _ in idx.search("alpha OR beta OR gamma", 5).hits} == {"1", "22", long}
    sims = idx.similarities(["22", long, "missing"], unit(1, seed=3)[0])
    assert sims[1] == pytest.approx(1.0, abs=2e-3) and sims[2] == 0


def test_rows_written_after_the_last_sort_are_found_and_win(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", dims=4, embedding_model="m")
    w.upsert([doc("1", "a"), doc("2", "b")], unit(2))
    w.close()  # sorted: rows 0-1
    w = EmbeddedWriter(tmp_path / "i", dims=4, embedding_model="m")
    w.upsert([doc("2", "b again"), doc("3", "c")], unit(2, seed=7))
    w.commit()  # not sorted: a reader finds rows 2-3 in its small tail
    reader = EmbeddedIndex(tmp_path / "i")
    q = unit(2, seed=7)[0]
    assert reader.similarities(["2"], q)[0] == pytest.approx(1.0, abs=2e-3)  # the new row wins
    assert reader._lookup._tail == {"2": 2, "3": 3}
    w.close()
    sorted_reader = EmbeddedIndex(tmp_path / "i")
    assert sorted_reader._lookup._tail == {}  # nothing per document on the heap
    assert sorted_reader.similarities(["2", "3", "1"], q)[0] == pytest.approx(1.0, abs=2e-3)
    assert next(p for p, _ in sorted_reader.nearest(q, 3)) == "2"
    assert sorted(p for p, _ in sorted_reader.nearest(q, 5)) == ["1", "2", "3"]


def test_a_layout_2_index_is_upgraded_in_place_when_opened(tmp_path):
    vecs = unit(3)
    path = tmp_path / "i"
    EmbeddedIndex.build(path, [doc("7", "x"), doc("8", "y"), doc("9", "z")], vectors=vecs)
    # Rewrite it as the previous layout wrote it: pmids.txt, float16 vectors, no lookup.
    meta = json.loads((path / META).read_text())
    (path / "pmids.txt").write_text("7\n8\n9\n")
    (path / "vectors.f16").write_bytes(vecs.astype(np.float16).tobytes())
    for name in (pmids_file(10), VECTORS, SCALES, *(p.name for p in path.glob("lookup.*"))):
        (path / name).unlink()
    meta.update(version=2)
    for key in ("pmid_width", "lookup"):
        meta.pop(key)
    (path / META).write_text(json.dumps(meta))
    idx = EmbeddedIndex(path)
    assert json.loads((path / META).read_text())["version"] == 3
    assert not (path / "pmids.txt").exists() and not (path / "vectors.f16").exists()
    assert [p for p, _ in idx.search("y", 5).hits] == ["8"]
    np.testing.assert_allclose(idx.vectors(["9", "7"]), vecs[[2, 0]], atol=3e-3)


def test_a_shard_opened_for_reading_reloads_only_when_told(tmp_path):
    """tantivy's default reader reloads from a watcher thread (right after an open, and when
    meta.json changes), rewriting its meta lock: an index removed at that moment failed with
    "Directory not empty" (CI, the training's throwaway index). A shard opened here sees a later
    commit only after `reload()`, the control that the commit did happen.
    """
    EmbeddedIndex.build(tmp_path / "i", [doc("1", "trial")])
    (shard,) = shard_dirs(tmp_path / "i", 1)
    opened = open_shard(shard)
    writer = EmbeddedWriter(tmp_path / "i")
    writer.upsert([doc("2", "trial")], None)
    writer.close()
    time.sleep(1.2)  # the watcher looks every 500 ms
    assert opened.searcher().num_docs == 1
    opened.reload()
    assert opened.searcher().num_docs == 2


def test_removing_an_index_meets_a_lock_written_mid_way_and_tries_again(tmp_path, monkeypatch):
    """An open's first reload can still land while the directory is removed: the removal retries."""
    EmbeddedIndex.build(tmp_path / "i", [doc("1", "trial")])
    real, calls = shutil.rmtree, []

    def lock_appears(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(39, "Directory not empty")
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", lock_appears)
    remove_index(tmp_path / "i")
    assert len(calls) == 2 and not (tmp_path / "i").exists()
    remove_index(tmp_path / "i")  # already gone: nothing to do
