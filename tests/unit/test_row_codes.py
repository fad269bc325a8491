"""Row codes: cosines estimated from one-byte product codes, and the shortlist read exactly.

The default path fuses BM25 with the cosine of every candidate; with row codes the cosines come
from the codes first and from the int8 rows for the shortlist only. Proofs: the estimates track
the exact cosines, rows the codes do not cover are exact, the shortlist keeps the exact top and
the exact scaling, rerank reads no more rows than the shortlist, and the codes are built from
the setting's size on and again when stale. Each has its control: the estimates alone change the
top, a floor left out moves the scaling.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from langgraph.runtime import Runtime

import infra.search.shortlist as shortlist_module
from infra.search.backends import refresh_dense
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_store import EmbeddedWriter
from infra.search.fusion import fuse
from infra.search.row_codes import CODES, META, RowCodes, bytes_for
from infra.search.shortlist import FLOOR, fusion_cosines
from nodes.rerank import rerank

DIMS, ROWS = 64, 3000


def doc(pmid: str) -> dict:
    return {"pmid": pmid, "title": f"title {pmid}", "abstract": f"text {pmid}", "year": 2020}


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 8 centres, as embeddings of topics are."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, DIMS))
    vecs = centres[rng.integers(8, size=n)] + 0.6 * rng.normal(size=(n, DIMS))
    vecs = vecs.astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def coded(tmp_path, n: int = ROWS, *, codes_rows: int = 1000) -> EmbeddedIndex:
    index = EmbeddedIndex.build(
        tmp_path / "i", [doc(str(i)) for i in range(n)], vectors=clustered(n), embedding_model="m"
    )
    index.dense_stage(ann_rows=10**9, share=1.0, codes_rows=codes_rows)
    return index


def queries(count: int) -> list[np.ndarray]:
    return [clustered(ROWS + 50, seed=0)[ROWS + i] for i in range(count)]  # near the topics


def bm25_scores(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).gamma(2.0, 3.0, size=n).astype(np.float32)


def shortlisted(index, pmids, bm25, query):
    """The cosines the default path fuses, as rerank asks for them (1,000 read, top 300 exact)."""
    cosine, _ = fusion_cosines(
        index,
        pmids,
        bm25,
        query,
        method="interpolate",
        alpha=0.6,
        rrf_k=60,
        shortlist=1000,
        keep=300,
    )
    return cosine


def test_estimates_follow_the_exact_cosines_and_uncovered_rows_are_exact(tmp_path):
    index = coded(tmp_path)
    assert index.rough_similarities(["1"], queries(1)[0]) is None  # no codes yet
    codes = index.refresh_row_codes()
    assert codes is not None and codes.rows == ROWS and codes.codes.shape == (ROWS, bytes_for(DIMS))
    writer = EmbeddedWriter(tmp_path / "i", dims=DIMS, embedding_model="m")
    writer.upsert([doc("late")], clustered(1, seed=9))
    writer.upsert([doc("bare")], np.zeros((1, DIMS), dtype=np.float32))
    writer.close()
    reopened = EmbeddedIndex(tmp_path / "i")
    pmids = [str(i) for i in range(ROWS)] + ["late", "bare", "unknown"]
    for query in queries(3):
        rough = reopened.rough_similarities(pmids, query)
        exact = reopened.similarities(pmids, query)
        assert rough is not None and exact is not None
        assert np.corrcoef(rough[:ROWS], exact[:ROWS])[0, 1] > 0.9
        assert np.abs(rough[:ROWS] - exact[:ROWS]).mean() < 0.05
        assert not np.allclose(rough[:ROWS], exact[:ROWS], atol=1e-4)  # estimates, not copies
        assert rough[ROWS] == pytest.approx(exact[ROWS], abs=1e-6)  # written after the codes
        assert rough[ROWS + 1] == 0.0 and rough[ROWS + 2] == 0.0  # no vector; not indexed


def test_the_shortlist_keeps_the_exact_top_where_the_estimates_alone_do_not(tmp_path):
    index = coded(tmp_path)
    index.refresh_row_codes()
    pmids = [str(i) for i in range(ROWS)]
    moved = 0
    for seed, query in enumerate(queries(6)):
        bm25 = bm25_scores(ROWS, seed)
        exact = index.similarities(pmids, query)
        rough = index.rough_similarities(pmids, query)
        mixed = shortlisted(index, pmids, bm25, query)

        def top(cosine: np.ndarray, bm25: np.ndarray = bm25) -> list[int]:
            fused = fuse(bm25, cosine, "interpolate", 0.6, 60)
            return list(np.argsort(-fused, kind="stable")[:300])

        assert top(mixed) == top(exact)
        # The floor and ceiling: the scaling rests on exact cosines.
        assert (mixed.min(), mixed.max()) == (exact.min(), exact.max())
        moved += top(rough) != top(exact)  # the control: the estimates alone
    assert moved == 6


def test_without_the_floor_the_scaling_rests_on_an_estimate(tmp_path, monkeypatch):
    index = coded(tmp_path)
    index.refresh_row_codes()
    pmids = [str(i) for i in range(ROWS)]
    query, bm25 = queries(1)[0], bm25_scores(ROWS, 0)
    exact = index.similarities(pmids, query)
    monkeypatch.setattr(shortlist_module, "FLOOR", 0)
    assert shortlisted(index, pmids, bm25, query).min() != exact.min()


def test_few_candidates_and_indexes_without_codes_are_scored_exactly(tmp_path):
    index = coded(tmp_path)
    pmids = [str(i) for i in range(ROWS)]
    query, bm25 = queries(1)[0], bm25_scores(ROWS, 1)
    exact = index.similarities(pmids, query)

    def cosines(shortlist: int) -> np.ndarray:
        cosine, read = fusion_cosines(
            index,
            pmids,
            bm25,
            query,
            method="rrf",
            alpha=0.6,
            rrf_k=60,
            shortlist=shortlist,
            keep=300,
        )
        assert (read == ROWS) == np.array_equal(cosine, exact)
        return cosine

    assert np.array_equal(cosines(100), exact)  # no codes built
    index.refresh_row_codes()
    assert np.array_equal(cosines(ROWS - FLOOR), exact)  # no more candidates than the shortlist
    assert not np.array_equal(cosines(100), exact)


async def test_rerank_reads_the_shortlist_exactly_and_ranks_as_the_exact_path(
    tmp_path, make_context, settings, monkeypatch
):
    index = coded(tmp_path)
    candidates = [(str(i), float(s)) for i, s in enumerate(bm25_scores(ROWS, 3))]
    question = "mitochondria lace plant programmed cell death"
    context = make_context(settings_=settings)
    assert context.embedder.embed_query(question).shape[0] == DIMS  # the index's dims
    exact = await rerank(
        {"question": question, "candidates": candidates},
        Runtime(context=replace(context, search=index)),
    )
    index.refresh_row_codes()
    asked: list[int] = []
    real = EmbeddedIndex.similarities

    def counted(self, pmids, vector):
        asked.append(len(pmids))
        return real(self, pmids, vector)

    monkeypatch.setattr(EmbeddedIndex, "similarities", counted)
    shortlisted = await rerank(
        {"question": question, "candidates": candidates},
        Runtime(context=replace(context, search=index)),
    )
    ranked = [p for p, _ in shortlisted["ranked"]]
    # What rerank fused is what the shortlist gives, read exactly for no more than it ...
    pmids, bm25 = [p for p, _ in candidates], np.array([s for _, s in candidates], np.float32)
    monkeypatch.setattr(EmbeddedIndex, "similarities", real)
    cosine, read = fusion_cosines(
        index,
        pmids,
        bm25,
        context.embedder.embed_query(question),
        method="interpolate",
        alpha=0.6,
        rrf_k=60,
        shortlist=1000,
        keep=300,
    )
    fused = fuse(bm25, cosine, "interpolate", 0.6, 60)
    assert ranked == [pmids[i] for i in np.argsort(-fused, kind="stable")[:300]]
    assert asked and sum(asked) == read < ROWS / 2  # the exact path reads all 3,000
    assert f"cosines of {ROWS - read:,} of 3,000 candidates estimated" in shortlisted["notes"][0]
    assert not exact["notes"]  # read exactly, nothing to say
    # ... and it keeps what the exact path ranks (a question unlike every document here, so
    # the cosines crowd and the estimates' errors tell more than on real vectors).
    assert len(set(ranked) & {p for p, _ in exact["ranked"]}) >= 0.97 * len(ranked)


def test_codes_are_built_from_the_setting_on_and_again_when_stale(tmp_path):
    index = coded(tmp_path, codes_rows=5000)
    assert index.refresh_row_codes() is None and not (tmp_path / "i" / META).exists()
    index.dense_stage(ann_rows=10**9, share=1.0, codes_rows=1000)
    assert index.refresh_row_codes() is not None and (tmp_path / "i" / CODES).is_file()
    assert index.refresh_row_codes() is None  # fresh
    writer = EmbeddedWriter(tmp_path / "i", dims=DIMS, embedding_model="m")
    writer.upsert([doc(f"n{i}") for i in range(400)], clustered(400, seed=5))
    writer.close()
    grown = EmbeddedIndex(tmp_path / "i")
    grown.dense_stage(ann_rows=10**9, share=1.0, codes_rows=1000)
    again = grown.refresh_row_codes()
    assert again is not None and again.rows == ROWS + 400
    assert RowCodes.open(tmp_path / "i").rows == ROWS + 400


def test_code_bytes_divide_the_dimensions():
    assert [bytes_for(d) for d in (384, 768, 1024, 64, 7)] == [48, 96, 128, 8, 1]


def test_the_index_commands_refresh_builds_the_codes_from_the_setting_on(tmp_path, settings):
    search = settings.search.model_copy(update={"index": "coded", "row_codes_rows": 2000})
    configured = settings.model_copy(update={"search": search})
    vectors = clustered(ROWS)
    EmbeddedIndex.build(
        configured.index_dir,
        [doc(str(i)) for i in range(ROWS)],
        vectors=vectors,
        embedding_model="m",
    )
    said = refresh_dense(configured)
    assert said is not None and "row codes for reranking: 3,000 rows" in said
    assert RowCodes.open(configured.index_dir).rows == ROWS
    assert refresh_dense(configured) is None  # fresh: nothing built again
    larger = configured.model_copy(
        update={"search": search.model_copy(update={"row_codes_rows": 5000, "index": "other"})}
    )
    EmbeddedIndex.build(
        larger.index_dir, [doc(str(i)) for i in range(ROWS)], vectors=vectors, embedding_model="m"
    )
    assert refresh_dense(larger) is None and RowCodes.open(larger.index_dir) is None


class Planted:
    """An engine whose estimates of a block of candidates run high, as codes' errors can."""

    def __init__(self, n: int = 2000, high: int = 400, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.pmids = [str(i) for i in range(n)]
        self.exact = rng.uniform(0.0, 0.6, size=n).astype(np.float32)
        self.estimate = self.exact + rng.normal(0, 0.01, size=n).astype(np.float32)
        self.estimate[:high] += 0.5  # ranked first by the estimate, shortlisted, then fall back
        self.read = 0

    def rough_similarities(self, pmids, vector):
        return self.estimate.copy()

    def similarities(self, pmids, vector):
        self.read += len(pmids)
        return self.exact[[int(p) for p in pmids]]


def test_candidates_the_exact_scores_let_into_the_head_are_read_exactly_too():
    engine = Planted()
    bm25 = np.ones(len(engine.pmids), dtype=np.float32)

    def cosines(keep: int) -> np.ndarray:
        engine.read = 0
        cosine, read = fusion_cosines(
            engine,
            engine.pmids,
            bm25,
            np.zeros(4, np.float32),
            method="interpolate",
            alpha=0.6,
            rrf_k=60,
            shortlist=400,
            keep=keep,
        )
        assert read == engine.read
        return cosine

    def head(cosine: np.ndarray) -> np.ndarray:
        return np.argsort(-fuse(bm25, cosine, "interpolate", 0.6, 60), kind="stable")[:300]

    mixed = cosines(300)
    assert np.array_equal(mixed[head(mixed)], engine.exact[head(mixed)])
    assert engine.read < len(engine.pmids)  # a few more rows, not all of them
    once = cosines(0)  # the control: the shortlist read once, nothing after
    assert not np.array_equal(once[head(once)], engine.exact[head(once)])
