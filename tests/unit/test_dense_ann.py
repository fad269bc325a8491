"""The dense stage through the IVF index: the same answers as the exact scan when every list is
scanned, fewer lists scanned when asked, rows written since the build still found, and the
index built only when the vectors outgrow the exact scan."""

import numpy as np

from infra.search import ann as ann_module
from infra.search.ann import ANN_FILE, AnnIndex, lists_for
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_store import EmbeddedWriter

DIMS = 16


def doc(pmid):
    return {"pmid": pmid, "title": f"title {pmid}", "abstract": f"text {pmid}", "year": 2020}


def clustered(n, seed=0):
    """Unit vectors around 20 centres, as embeddings of topics are."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, DIMS))
    vecs = centres[rng.integers(20, size=n)] + 0.4 * rng.normal(size=(n, DIMS))
    vecs = vecs.astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def built(tmp_path, n=2000, *, share=1.0, rows=1000):
    vectors = clustered(n)
    index = EmbeddedIndex.build(
        tmp_path / "i", [doc(str(i)) for i in range(n)], vectors=vectors, embedding_model="m"
    )
    index.dense_stage(ann_rows=rows, share=share)
    return index, vectors


def test_scanning_every_list_gives_the_exact_answer(tmp_path):
    index, _ = built(tmp_path, share=0.999)  # rounds to every list: the IVF path, all of it
    assert index.refresh_ann() is not None and (tmp_path / "i" / ANN_FILE).is_file()
    plain = EmbeddedIndex(tmp_path / "i")
    plain.dense_stage(ann_rows=10**9, share=1.0)  # never the IVF index: the exact scan
    for seed in range(5):
        query = clustered(1, seed=100 + seed)[0]
        found, truth = index.nearest(query, 30), plain.nearest(query, 30)
        assert [p for p, _ in found] == [p for p, _ in truth]
        assert np.allclose([s for _, s in found], [s for _, s in truth], atol=1e-6)


def test_a_small_share_scans_fewer_lists_and_scores_what_it_finds_exactly(tmp_path):
    index, _ = built(tmp_path, share=1 / 16)
    index.refresh_ann()
    plain = EmbeddedIndex(tmp_path / "i")
    plain.dense_stage(ann_rows=10**9, share=1.0)
    differs = 0
    for seed in range(20):
        query = clustered(1, seed=200 + seed)[0]
        found, truth = index.nearest(query, 50), plain.nearest(query, 50)
        differs += found != truth
        pmids = [p for p, _ in found]
        assert np.allclose([s for _, s in found], plain.similarities(pmids, query), atol=1e-6)
        assert len(set(pmids) & {p for p, _ in truth}) >= 25  # an approximation, not noise
    assert differs  # the control: a sixteenth of the lists does not always find the exact top


def test_a_large_scan_runs_on_every_core_and_names_the_same_candidates(tmp_path, monkeypatch):
    index, _ = built(tmp_path, n=4000, rows=4000)
    ann = index.refresh_ann()
    assert ann is not None and ann.lists >= 8
    nprobe = ann.lists // 4

    def candidates(query, parallel_from, lists=nprobe):
        monkeypatch.setattr(ann_module, "PARALLEL_ROWS", parallel_from)
        found = set(ann.search(query, 20, lists).tolist())
        return found, ann.index.implem

    kept, control = [], []
    for seed in range(10):
        query = clustered(1, seed=300 + seed)[0]
        one, implem = candidates(query, 10**12)
        assert implem == 0  # below the threshold: faiss's one thread
        wide, implem = candidates(query, 1)
        assert implem == ann_module.LIST_PARALLEL and len(one) == len(wide) == 200
        kept.append(len(wide & one) / 200)
        # the control: half the lists, which the same measure rejects
        control.append(len(candidates(query, 1, nprobe // 2)[0] & one) / 200)
    # fast scan ranks rows by 16-bit sums, ties broken as its heap meets them: a split can swap
    # a row tied at the 200th place, no more
    assert min(kept) >= 0.98 and np.mean(kept) >= 0.99
    assert np.mean(control) < 0.9


def test_only_scans_of_a_million_rows_or_more_run_on_every_core():
    assert not ann_module.parallel(ann_module.PARALLEL_ROWS - 1)
    assert ann_module.parallel(ann_module.PARALLEL_ROWS)


def test_rows_written_after_the_build_are_found(tmp_path):
    index, vectors = built(tmp_path, share=1 / 16)
    index.refresh_ann()
    writer = EmbeddedWriter(tmp_path / "i", dims=DIMS, embedding_model="m")
    target = -vectors[0]  # far from everything it was built on
    writer.upsert([doc("new")], target[None, :])
    writer.close()
    reopened = EmbeddedIndex(tmp_path / "i")
    reopened.dense_stage(ann_rows=1000, share=1 / 16)
    assert AnnIndex.open(tmp_path / "i").rows == 2000
    assert reopened.nearest(target, 3)[0][0] == "new"


def test_the_index_is_built_only_once_the_vectors_outgrow_the_exact_scan(tmp_path):
    index, _ = built(tmp_path, rows=5000)
    assert index.refresh_ann() is None and not (tmp_path / "i" / ANN_FILE).exists()
    index.dense_stage(ann_rows=1000, share=0.25)
    first = index.refresh_ann()
    assert first is not None and first.rows == 2000 and first.lists == lists_for(2000)
    assert index.refresh_ann() is None  # fresh: nothing to do
    writer = EmbeddedWriter(tmp_path / "i", dims=DIMS, embedding_model="m")
    writer.upsert([doc(f"n{i}") for i in range(300)], clustered(300, seed=7))
    writer.close()
    grown = EmbeddedIndex(tmp_path / "i")
    grown.dense_stage(ann_rows=1000, share=0.25)
    again = grown.refresh_ann()  # 300 new rows: more than a tenth uncovered
    assert again is not None and again.rows == 2300


def test_list_counts_follow_the_square_root():
    assert [lists_for(n) for n in (100, 14_448, 1_000_000, 10_000_000)] == [32, 512, 4096, 16384]


def test_an_index_built_with_the_earlier_scalar_quantizer_still_serves(tmp_path):
    import faiss

    index, vectors = built(tmp_path, share=0.999)
    index.refresh_ann()
    # Rewrite ann.faiss as the 8-bit scalar quantizer indexes of an earlier release were built.
    lists = lists_for(len(vectors))
    old = faiss.IndexIVFScalarQuantizer(
        faiss.IndexFlatIP(DIMS),
        DIMS,
        lists,
        faiss.ScalarQuantizer.QT_8bit,
        faiss.METRIC_INNER_PRODUCT,
    )
    old.train(vectors)
    old.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64))
    faiss.write_index(old, str(tmp_path / "i" / ANN_FILE))
    reopened = EmbeddedIndex(tmp_path / "i")
    reopened.dense_stage(ann_rows=1000, share=0.999)
    plain = EmbeddedIndex(tmp_path / "i")
    plain.dense_stage(ann_rows=10**9, share=1.0)
    query = clustered(1, seed=300)[0]
    assert type(AnnIndex.open(tmp_path / "i").index).__name__ == "IndexIVFScalarQuantizer"
    assert reopened.nearest(query, 20) == plain.nearest(query, 20)
