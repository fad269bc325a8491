"""`quorum bench scale`: the synthetic corpus generator and the measured halves, on a small corpus."""

import gzip
import json
from collections import Counter

import numpy as np
import pytest
from typer.testing import CliRunner

from graphs.cli import app
from graphs.cli.common import CliError
from infra.bioasq.formats import Question
from infra.errors import Unavailable
from infra.ingest.sources import normalize
from infra.search.row_codes import RowCodes
from lab.bench import query, scale, scale_child, scale_peers, scale_report
from lab.bench.synthetic import SYNTHETIC_PMID, SentencePool, postings_share
from tests.support.data import CORPUS
from tests.support.fakes import HashEmbedder


@pytest.fixture(scope="module")
def real():
    with gzip.open(CORPUS, "rt") as fh:
        docs = [normalize(json.loads(line)) for line in fh]
    vectors = HashEmbedder().embed_documents([f"{d['title']}. {d['abstract']}" for d in docs])
    return docs, vectors


def test_the_corpus_holds_every_real_document_once_among_resampled_ones(real):
    docs, vectors = real
    pool = SentencePool(docs, vectors)
    batches = list(pool.batches(3000, seed=1, batch_size=700))
    made = [d for b in batches for d in b.docs]
    assert len(made) == 3000
    pmids = Counter(d["pmid"] for d in made)
    assert max(pmids.values()) == 1
    assert {d["pmid"] for d in docs} <= set(pmids)
    fake = [d for d in made if int(d["pmid"]) >= SYNTHETIC_PMID]
    assert len(fake) == 3000 - len(docs)
    sentences = set(pool.sentences)
    for doc in fake[:50]:
        assert doc["abstract"] and all(s in sentences for s in _split(doc["abstract"], sentences))
    # Real documents are spread through the corpus, not bunched at one end.
    where = [i for i, d in enumerate(made) if int(d["pmid"]) < SYNTHETIC_PMID]
    assert where[0] < 10 and where[-1] > 2900
    stacked = np.concatenate([b.vectors for b in batches])
    assert stacked.shape == (3000, 64)
    assert np.allclose(np.linalg.norm(stacked, axis=1), 1.0, atol=1e-5)
    first_real = where[0]
    assert np.allclose(stacked[first_real], vectors[docs.index(made[first_real])])


def _split(abstract, sentences):
    """Cut a synthetic abstract back into the pool's sentences (one sentence may begin another,
    so every way is tried); fails if no cut uses the pool's sentences alone."""
    from functools import cache

    @cache
    def cut(at):
        if at == len(abstract):
            return ()
        for s in sorted((s for s in sentences if abstract.startswith(s, at)), key=len):
            end = at + len(s)
            if end == len(abstract) or abstract[end] == " ":
                rest = cut(len(abstract) if end == len(abstract) else end + 1)
                if rest is not None:
                    return (s, *rest)
        return None

    parts = cut(0)
    assert parts is not None, abstract
    return parts


def test_synthetic_abstracts_are_as_long_as_pubmeds_not_as_the_short_snippets_they_come_from(real):
    docs, _ = real
    made = [d for b in SentencePool(docs).batches(4000, seed=2) for d in b.docs]
    fake = [d for d in made if int(d["pmid"]) >= SYNTHETIC_PMID]
    words = np.array([len(d["abstract"].split()) for d in fake])
    # PubMed's (PUBMED_ABSTRACT_WORDS): mean 240, median 242; each abstract is whole sentences,
    # so its length is the drawn one give or take a sentence
    assert 215 <= words.mean() <= 265 and 215 <= np.median(words) <= 270
    assert np.percentile(words, 10) > 120 and np.percentile(words, 90) < 380
    # the negative control: the corpus they are drawn from is BioASQ snippets, a fifth as long,
    # which the earlier generator copied
    assert np.mean([len(d["abstract"].split()) for d in docs]) < 100
    assert sum(bool(d["title"]) for d in fake) == len(fake)  # PubMed's records have titles


def test_the_same_seed_gives_the_same_corpus_and_another_seed_another(real):
    docs, _ = real
    pool = SentencePool(docs)
    one = [d["abstract"] for b in pool.batches(1000, seed=3) for d in b.docs]
    again = [d["abstract"] for b in pool.batches(1000, seed=3) for d in b.docs]
    other = [d["abstract"] for b in pool.batches(1000, seed=4) for d in b.docs]
    assert one == again and one != other


def test_a_size_below_the_real_documents_is_refused(real):
    with pytest.raises(ValueError, match="cannot hold the 707 real documents"):
        next(SentencePool(real[0]).batches(100))


def ingested(tmp_path, real, size=1500, **search):
    """Run the bench's ingest child on `real` resampled to `size`; return its job and figures."""
    docs, vectors = real
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    np.save(tmp_path / "vectors.npy", vectors)
    settings = {"home": str(tmp_path), "search": search}
    job = {"corpus": str(corpus), "size": size, "seed": 0, "model": "hash-64", "settings": settings}
    return job, scale_child.ingest(job | {"vectors": str(tmp_path / "vectors.npy")})


def test_ingest_and_query_measure_a_real_embedded_index(tmp_path, real):
    docs, vectors = real
    job, figures = ingested(tmp_path, real, index="scale-1500")
    settings = job["settings"]
    assert figures["docs"] == 1500 and figures["docs_per_s"] > 0
    # int8 rows and a float32 scale each
    assert figures["vectors_mib"] == pytest.approx(1500 * (64 + 4) / 2**20, abs=0.1)
    gold = [[docs[0]["pmid"]], [docs[1]["pmid"]]]
    queries = [docs[0]["title"] or docs[0]["abstract"][:80], docs[1]["abstract"][:80]]
    np.savez(
        tmp_path / "queries.npz",
        queries=np.array([" OR ".join(q.split()[:6]) for q in queries], dtype=object),
        vectors=vectors[:2],
        gold=np.array(gold, dtype=object),
    )
    nearest = []
    real_nearest = scale_child.EmbeddedIndex.nearest

    def counted(self, vector, k):
        nearest.append(k)
        return real_nearest(self, vector, k)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scale_child.EmbeddedIndex, "nearest", counted)
        asked = scale_child.query({"settings": settings, "queries": str(tmp_path / "queries.npz")})
    # the dense stage is asked each question once untimed, then timed: 2 questions, 4 calls
    assert nearest.count(100) == 4 and asked["dense_top100_p50_ms"] > 0
    assert asked["recall_at_1000_bm25"] == 1.0  # the real documents are found among the fakes
    assert asked["bm25_top1000_p50_ms"] > 0 and asked["mean_candidates"] > 2
    assert asked["open_rss_mib"] < 50  # the index is mapped, not read into the heap
    # the postings the questions' terms hold, per document: at least their own gold's words
    assert 0 < asked["query_postings_share"]["median"] <= asked["query_postings_share"]["mean"] * 2
    assert asked["evicted_mib"] >= figures["disk_mib"] - 0.1  # every file of the index
    same = scale_peers.fidelity(
        job
        | {
            "settings": settings,
            "vectors": str(tmp_path / "vectors.npy"),
            "queries": str(tmp_path / "queries.npz"),
        }
    )
    assert same["int8_max_cosine_error"] < 4e-3  # int8 rounding, against the float32 given
    assert same["int8_fused_top10_overlap"] >= 0.9 and same["int8_dense_top100_recall"] >= 0.9
    assert same["int8_recall_at_10_fused"] == same["float32_recall_at_10_fused"] == 1.0
    peer = scale_peers.peer(job | {"queries": str(tmp_path / "queries.npz")})
    assert peer["bm25s_recall_at_1000"] == 1.0  # the same corpus and queries, in bm25s
    assert peer["bm25s_top1000_p50_ms"] > 0 and peer["bm25s_index_s"] >= 0
    assert peer["bm25s_numba_recall_at_1000"] == 1.0  # its fastest backend, the same hits


def test_a_querys_postings_share_counts_each_term_once_and_none_it_excludes():
    held = {"cell": 50, "gene": 10, "mous": 100}
    shares = postings_share(["cell OR cells OR gene", "gene NOT mouse"], held.__getitem__, 100)
    # "cells" is the term "cell" again; the excluded "mouse" is never scored: 0.6 and 0.1
    assert shares == {"mean": 0.35, "median": 0.35}
    one = postings_share(["(cell AND gene) OR title:mouse"], held.__getitem__, 100)
    assert one == {"mean": 1.6, "median": 1.6}  # grouped and fielded words count too


def test_the_real_abstracts_share_is_taken_from_whole_abstracts_only(tmp_path):
    raw = [
        {"pmid": "1", "title": "", "abstract": "Cells divide.", "source": "pubmedqa"},
        {"pmid": "2", "title": "", "abstract": "Mice grow.", "source": "pubmedqa"},
        {"pmid": "3", "title": "", "abstract": "Genes and cells.", "source": "bioasq-snippets"},
    ]
    path = tmp_path / "queries.npz"
    np.savez(path, queries=np.array(["cells OR genes", "grows"], dtype=object))
    # the snippet's genes and cells are not counted: 1/2, then "grows" (the stem of "grow") 1/2
    assert scale.reference_share(raw, path) == {"docs": 2, "mean": 0.5, "median": 0.5}
    assert scale.reference_share(raw[2:], path) is None  # no whole abstract to read against


def test_the_search_settings_shard_the_index_the_bench_builds(tmp_path, real):
    docs, vectors = real
    job, built = ingested(tmp_path, real, index="s", embedded_shards=2)
    settings = job["settings"]
    assert built["docs"] == 1500
    queries = [" OR ".join(d["abstract"].split()[:6]) for d in docs[:3]]
    np.savez(
        tmp_path / "queries.npz",
        queries=np.array(queries, dtype=object),
        vectors=vectors[:3],
        gold=np.array([[d["pmid"]] for d in docs[:3]], dtype=object),
    )
    asked = scale_child.query({"settings": settings, "queries": str(tmp_path / "queries.npz")})
    assert asked["shards"] == 2 and asked["segments"] >= 2
    assert asked["recall_at_1000_bm25"] == 1.0


def test_an_index_past_the_row_codes_threshold_is_queried_through_them(tmp_path, real):
    docs, vectors = real
    job, built = ingested(tmp_path, real, index="c", row_codes_rows=1000)
    settings = job["settings"]
    assert RowCodes.open(tmp_path / "indexes" / "c").rows == 1500  # built with the index
    assert built["row_codes_mib"] == pytest.approx(
        1500 * 64 / 8 / 2**20, abs=0.005
    )  # a byte / 8 dims
    assert ingested(tmp_path, real, index="none")[1]["row_codes_mib"] == 0  # below the threshold
    np.savez(
        tmp_path / "queries.npz",
        queries=np.array(["the OR of OR and OR in"] * 2, dtype=object),  # most of the corpus
        vectors=vectors[:2],
        gold=np.array([[docs[0]["pmid"]], [docs[1]["pmid"]]], dtype=object),
    )
    asked = scale_child.query(
        {"settings": settings, "queries": str(tmp_path / "queries.npz"), "default_only": True}
    )
    assert asked["mean_candidates"] > 1032  # more than the shortlist: the codes were used
    assert 0 < asked["default_path_peak_rss_mib"] <= asked["query_peak_rss_mib"]
    assert "dense_top100_p50_ms" not in asked  # the default configuration alone


def test_extrapolation_scales_disk_and_vectors_to_26_million_not_the_open_memory():
    embedded = {"disk_mib_with_vectors": 4096.0, "vectors_mib": 1024.0, "open_rss_mib": 3.0}
    sizes = {
        "200000": {"embedded": {"disk_mib_with_vectors": 1024.0, "open_rss_mib": 3.0}},
        "1000000": {
            "embedded": embedded,
            "elasticsearch": {"disk_mib_with_vectors": 8192.0, "open_rss_mib": 40.0},
            "bm25s": {"bm25s_top1000_p50_ms": 5.0},
        },
    }
    out = scale_report.extrapolate(sizes)
    assert out["from_size"] == 1_000_000
    assert out["embedded"] == {
        "disk_gib_with_vectors": 104.0,
        "vectors_gib": 26.0,
        "open_rss_mib_measured": 3.0,
    }
    assert out["elasticsearch"] == {"disk_gib_with_vectors": 208.0}
    assert "bm25s" not in out
    # Elasticsearch stopped at 1 M while the embedded engine went on: each from its own largest
    sizes["5000000"] = {"embedded": {k: 5 * v for k, v in embedded.items()}}
    out = scale_report.extrapolate(sizes)
    assert out["from_size"] == 5_000_000 and out["embedded"]["vectors_gib"] == 26.0
    assert out["elasticsearch"] == {"disk_gib_with_vectors": 208.0, "from_size": 1_000_000}


def test_targets_are_checked_at_a_million_documents_against_bm25s_of_the_same_run():
    fast = {
        "default_10000_to_300_p50_ms": 21.0,
        "open_s": 0.01,
        "open_rss_mib": 3.0,
        "bm25_top1000_p50_ms": 4.0,
    }
    sizes = {
        "200000": {"embedded": {**fast, "default_10000_to_300_p50_ms": 99.0}},
        "1000000": {
            "embedded": fast,
            "bm25s": {"bm25s_top1000_p50_ms": 5.5, "bm25s_numba_top1000_p50_ms": 4.5},
        },
    }
    checked = scale_report.targets(sizes)
    assert list(checked) == ["1000000"]  # the targets are for 1 M documents and more
    assert all(c["met"] for c in checked["1000000"].values())
    sizes["1000000"]["bm25s"]["bm25s_numba_top1000_p50_ms"] = 0.9
    sizes["1000000"]["embedded"]["default_10000_to_300_p50_ms"] = 31.0
    missed = {k for k, c in scale_report.targets(sizes)["1000000"].items() if not c["met"]}
    assert missed == {"bm25_p50_ms_vs_bm25s_numba", "default_p50_ms"}


def test_full_size_corpora_are_held_to_issue_31s_targets():
    measured = {
        "bm25_top1000_p50_ms": 12.5,
        "default_10000_to_300_p50_ms": 40.8,  # above issue 18's 30 ms: not judged by it here
        "dense_top100_p50_ms": 22.8,
        "open_s": 0.003,
        "open_rss_mib": 5.3,
        "default_path_peak_rss_mib": 4390.0,
        # The dense stage (off by default) reads its IVF lists into the heap on top.
        "query_peak_rss_mib": 8375.0,
    }
    sizes = {"10000000": {"embedded": dict(measured)}}
    checked = scale_report.targets(sizes)["10000000"]
    assert set(checked) == {
        "bm25_p50_ms",
        "default_p50_ms",
        "dense_p50_ms",
        "open_s",
        "default_path_peak_rss_mib",
    }
    assert all(c["met"] for c in checked.values())
    sizes["10000000"]["embedded"] |= {
        "dense_top100_p50_ms": 51.0,
        "default_path_peak_rss_mib": 8200.0,
    }
    missed = {k for k, c in scale_report.targets(sizes)["10000000"].items() if not c["met"]}
    assert missed == {"dense_p50_ms", "default_path_peak_rss_mib"}
    # A report from before the default path's own peak was taken: the whole process's.
    del sizes["10000000"]["embedded"]["default_path_peak_rss_mib"]
    assert not scale_report.targets(sizes)["10000000"]["default_path_peak_rss_mib"]["met"]


def test_bm25_is_held_within_one_and_a_half_times_bm25s_numba_at_every_size():
    sizes = {
        "200000": {
            "embedded": {"bm25_top1000_p50_ms": 0.6},
            "bm25s": {"bm25s_top1000_p50_ms": 5.0, "bm25s_numba_top1000_p50_ms": 0.4},
        }
    }
    checked = scale_report.targets(sizes)["200000"]
    assert checked == {"bm25_p50_ms_vs_bm25s_numba": {"measured": 0.6, "target": 0.6, "met": True}}
    sizes["200000"]["embedded"]["bm25_top1000_p50_ms"] = 0.61
    assert not scale_report.targets(sizes)["200000"]["bm25_p50_ms_vs_bm25s_numba"]["met"]


def curve(sizes, codes_from=None, **exponents):
    """Embedded figures at `sizes` on exact power laws: 2 · (size / 1 M) ** exponent each."""
    keys = {
        "bm25": "bm25_top1000_p50_ms",
        "default": "default_10000_to_300_p50_ms",
        "dense": "dense_top100_p50_ms",
        "memory": "default_path_peak_rss_mib",
    }
    return {
        str(size): {
            "embedded": {
                keys[name]: 2 * (size / 1e6) ** exponent for name, exponent in exponents.items()
            }
            | {"row_codes_mib": 48 * size / 2**20 if codes_from and size >= codes_from else 0}
        }
        for size in sizes
    }


def test_the_figures_are_projected_to_26_million_along_the_measured_curve():
    sizes = curve([200_000, 1_000_000, 5_000_000, 10_000_000], bm25=0.8, dense=0.7, memory=1.0)
    sizes["200000"]["embedded"]["bm25_top1000_p50_ms"] = 99.0  # below 1 M: not on the curve
    projected = scale_report.project(sizes, codes_from=30_000_000)
    bm25 = projected["bm25_p50_ms"]
    assert bm25["sizes"] == [1_000_000, 5_000_000, 10_000_000]
    assert bm25["exponent"] == pytest.approx(0.8)
    assert bm25["at_26m"] == pytest.approx(2 * 26**0.8, abs=0.1) and bm25["at_26m"] > 20
    assert not bm25["met"] and bm25["target"] == 20.0
    assert projected["dense_p50_ms"]["at_26m"] == pytest.approx(2 * 26**0.7, abs=0.1)
    assert projected["dense_p50_ms"]["met"]
    assert projected["default_path_peak_rss_mib"]["at_26m"] == pytest.approx(52.0)
    assert "not_projected" in projected["default_p50_ms"]  # no size measured it
    # one size on the curve is no curve; a run that reached 26 M is judged on what it measured
    assert "not_projected" in scale_report.project(curve([1_000_000], bm25=0.8), 1)["bm25_p50_ms"]
    assert scale_report.project(curve([1_000_000, 26_000_000], bm25=0.8), 1) == {}


def test_the_default_paths_memory_is_projected_only_through_sizes_with_row_codes_as_26m_has():
    sizes = curve([1_000_000, 5_000_000, 10_000_000, 20_000_000], codes_from=10_000_000, memory=0.9)
    for size in ("1000000", "5000000"):  # without codes every candidate's int8 row is read
        sizes[size]["embedded"]["default_path_peak_rss_mib"] *= 3
    projected = scale_report.project(sizes, codes_from=10_000_000)["default_path_peak_rss_mib"]
    assert projected["sizes"] == [10_000_000, 20_000_000]
    assert projected["at_26m"] == pytest.approx(2 * 26**0.9, abs=0.05)
    # the control: with codes from beyond 26 M only the sizes without them are the curve
    beyond = scale_report.project(sizes, codes_from=30_000_000)["default_path_peak_rss_mib"]
    assert beyond["sizes"] == [1_000_000, 5_000_000]
    del sizes["20000000"]
    missing = scale_report.project(sizes, 10_000_000)["default_path_peak_rss_mib"]["not_projected"]
    assert (
        missing
        == "1 size(s) from 1 M measured it with row codes (as 26 M would have): a curve needs two"
    )
    # its latency is fitted through every size: at 26 M the codes moved it by noise
    sizes = curve([1_000_000, 5_000_000, 10_000_000], codes_from=10_000_000, default=0.4)
    assert scale_report.project(sizes, 10_000_000)["default_p50_ms"]["sizes"] == [
        1_000_000,
        5_000_000,
        10_000_000,
    ]


def scale_run(sizes, bm25):
    """A `bench scale --json` report of one run over `sizes`: figures from `curve`, BM25's
    growing with exponent `bm25`."""
    machine = {"cpu": "AMD EPYC", "simd": "avx2", "cores": 2, "memory_gib": 23.5}
    figures = curve(sizes, bm25=bm25, default=0.4, dense=0.7, memory=0.9)
    for engines in figures.values():
        engines["embedded"] |= {"open_s": 0.1, "open_rss_mib": 4.0}
    return {
        "real_docs": 14_448,
        "questions": 500,
        "model": "all-MiniLM-L6-v2",
        "seed": 0,
        "machine": machine,
        "sizes": figures,
        "not_run": [{"size": s, "backend": "elasticsearch", "why": "above"} for s in sizes],
    }


def test_runs_of_one_curve_merge_into_one_report_concluded_over_all_their_sizes():
    small = scale_run([1_000_000], bm25=0.8)
    small["sizes"]["1000000"]["bm25s"] = {"bm25s_numba_top1000_p50_ms": 1.0}
    larger = scale_run([5_000_000, 10_000_000], bm25=0.8)
    engine = scale_run([1_000_000], bm25=0.8)  # Elasticsearch at 1 M, measured in a later run
    engine["sizes"]["1000000"] = {"elasticsearch": {"disk_mib_with_vectors": 2048.0}}
    engine["not_run"] = []
    runs = [("large.json", larger), ("small.json", small), ("es.json", engine)]
    merged = scale_report.merge(runs, codes_from=30_000_000)
    assert list(merged["sizes"]) == ["1000000", "5000000", "10000000"]
    assert set(merged["sizes"]["1000000"]) == {"embedded", "bm25s", "elasticsearch"}
    assert merged["merged_from"][2] == {
        "report": "es.json",
        "sizes": {"1000000": ["elasticsearch"]},
    }
    # what a later run measured is no longer "not run"
    assert {n["size"] for n in merged["not_run"]} == {5_000_000, 10_000_000}
    bm25 = merged["projected_26m"]["bm25_p50_ms"]
    assert bm25["sizes"] == [1_000_000, 5_000_000, 10_000_000]
    assert bm25["exponent"] == pytest.approx(0.8)
    assert set(merged["targets"]) == {"1000000", "5000000", "10000000"}
    assert merged["extrapolated_26m"]["elasticsearch"] == {
        "disk_gib_with_vectors": 52.0,
        "from_size": 1_000_000,
    }
    # one run's report alone projects nothing from a single size: the merge made the curve
    alone = scale_report.project(small["sizes"], 30_000_000)["bm25_p50_ms"]
    assert "not_projected" in alone


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda r: r["machine"].update(cores=16), "differ in machine"),
        (lambda r: r.update(seed=1), "differ in seed"),
        (lambda r: r.update(questions=200), "differ in questions"),
        (lambda r: r["sizes"].update(curve([1_000_000], bm25=1.0)), "both measured embedded"),
        (lambda r: r.pop("sizes"), "not a `quorum bench scale --json` report"),
    ],
)
def test_reports_that_are_not_one_curve_are_refused(change, said):
    other = scale_run([5_000_000], bm25=0.8)
    change(other)
    with pytest.raises(ValueError, match=said):
        scale_report.merge([("a.json", scale_run([1_000_000], bm25=0.8)), ("b.json", other)], 1)


def test_merge_measures_nothing_and_names_a_bad_file_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("QUORUM_HOME", str(tmp_path / "home"))
    first, second = tmp_path / "1m.json", tmp_path / "10m.json"
    first.write_text(json.dumps(scale_run([1_000_000], bm25=1.0)))
    second.write_text(json.dumps(scale_run([10_000_000], bm25=1.0)))
    for files in ([str(first), "--merge", str(second)], [str(first), str(second)]):
        result = CliRunner().invoke(app, ["bench", "scale", "--json", "--merge", *files])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["projected_26m"]["bm25_p50_ms"]["exponent"] == pytest.approx(1.0)
        assert [r["report"] for r in report["merged_from"]] == [str(first), str(second)]
    assert not (tmp_path / "home" / "bench").exists()  # nothing built, no earlier report touched
    for bad, said in [
        ([str(tmp_path / "none.json")], "cannot read it"),
        ([str(first), "--sizes", "1000000"], "--sizes to measure or --merge"),
        ([str(first), "--merge", str(first)], "both measured embedded at 1000000"),
    ]:
        result = CliRunner().invoke(app, ["bench", "scale", "--merge", *bad])
        assert isinstance(result.exception, CliError) and said in str(result.exception)
    first.write_text("{")
    result = CliRunner().invoke(app, ["bench", "scale", "--merge", str(first)])
    assert isinstance(result.exception, CliError) and "not JSON" in str(result.exception)


def test_without_a_corpus_the_command_says_what_to_pass(monkeypatch, tmp_path):
    monkeypatch.setattr(scale, "SHARED_CORPUS", tmp_path / "missing.jsonl.gz")
    result = CliRunner().invoke(app, ["bench", "scale", "--sizes", "20000"])
    assert "no corpus to resample: pass --corpus" in str(result.exception)


def test_progress_is_said_when_due_and_at_the_end(capsys):
    patient = scale_child.Progress("rows", every_s=3600)
    patient(1, 10)
    patient(5, 10)
    assert capsys.readouterr().err == ""  # not due yet
    patient(10, 10)
    assert capsys.readouterr().err.startswith(f"{scale_child.PROGRESS}rows: 10 of 10 (")
    eager = scale_child.Progress("rows", every_s=0)
    eager(1, 10)
    eager(2, 10)
    assert capsys.readouterr().err.count(scale_child.PROGRESS) == 2


def test_a_child_passes_its_progress_on_and_keeps_the_rest_for_its_failure(tmp_path, real, capsys):
    docs, _ = real
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    settings = {"home": str(tmp_path), "search": {"index": "scale-1500"}}
    job = {"corpus": str(corpus), "size": 1500, "seed": 0, "model": "hash-64"}
    figures = scale._child("ingest", tmp_path, job | {"settings": settings})
    assert figures["docs"] == 1500 and figures["wall_s"] > 0
    err = capsys.readouterr().err
    assert "ingest documents written: 1,500 of 1,500" in err  # the last line, always said
    assert scale_child.PROGRESS not in err  # passed on without the child's marker
    with pytest.raises(RuntimeError, match=r"bench scale ingest failed: (.|\n)*missing\.jsonl"):
        missing = {"settings": settings, "corpus": str(tmp_path / "missing.jsonl")}
        scale._child("ingest", tmp_path, job | missing)
    assert "documents written" not in capsys.readouterr().err  # it wrote none


def test_each_bench_keeps_its_queries_under_its_own_name(tmp_path, real):
    docs, _ = real
    asked = [
        Question(
            id=str(i), body=f"Is {d['title'] or 'it'} found?", type="yesno", documents=[d["pmid"]]
        )
        for i, d in enumerate(docs[:6])
    ]
    scale.save_queries(tmp_path, docs, asked, HashEmbedder())
    dense = scale.save_queries(tmp_path, docs, asked[:2], HashEmbedder(), "queries-dense.npz")
    assert dense["path"].name == "queries-dense.npz" and dense["count"] == 2
    kept = np.load(tmp_path / "queries.npz", allow_pickle=True)
    assert len(kept["queries"]) == 6  # bench dense's fewer questions left bench scale's alone


def gold_questions(docs, n=4):
    return [
        Question(
            id=str(i), body=f"Is {d['title'] or 'it'} found?", type="yesno", documents=[d["pmid"]]
        )
        for i, d in enumerate(docs[:n])
    ]


def test_elasticsearch_is_loaded_only_up_to_its_size(monkeypatch, settings, tmp_path, real):
    docs, _ = real
    monkeypatch.setattr(scale, "HuggingFaceEmbedder", lambda _: HashEmbedder())
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    # No node is asked for: the one size is above the cap, so nothing is loaded at all.
    report = scale.bench_scale(
        settings, corpus, gold_questions(docs), [1500], ["elasticsearch"], elasticsearch_up_to=1000
    )
    assert report["sizes"] == {"1500": {}}
    assert report["not_run"] == [
        {"size": 1500, "backend": "elasticsearch", "why": "above --elasticsearch-up-to 1,000"}
    ]


def test_a_silent_elasticsearch_is_named_before_hours_of_loading(monkeypatch, tmp_path, real):
    docs, _ = real
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    questions = tmp_path / "golden.json"
    body = [{"id": "q", "body": "Is it?", "type": "yesno", "documents": [docs[0]["pmid"]]}]
    questions.write_text(json.dumps({"questions": body}))
    monkeypatch.setenv("QUORUM_HOME", str(tmp_path))
    monkeypatch.setenv("QUORUM_SEARCH__ELASTICSEARCH_URL", "http://127.0.0.1:9")
    args = ["bench", "scale", "--corpus", str(corpus), "--questions", str(questions)]
    result = CliRunner().invoke(app, [*args, "--sizes", "1500", "--backends", "elasticsearch"])
    assert isinstance(result.exception, Unavailable)  # `quorum` says it in one line, exit 2
    assert "Elasticsearch at http://127.0.0.1:9 cannot be reached" in str(result.exception)
    assert not (tmp_path / "bench").exists()  # refused before anything was embedded or written
    # The control: above its cap Elasticsearch is not asked for, so a silent node is no matter.
    monkeypatch.setattr(scale, "HuggingFaceEmbedder", lambda _: HashEmbedder())
    result = CliRunner().invoke(
        app,
        [
            *args,
            "--sizes",
            "1500",
            "--backends",
            "elasticsearch",
            "--elasticsearch-up-to",
            "1000",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["not_run"][0]["backend"] == "elasticsearch"


def test_the_exact_pass_finds_each_querys_hundredth_score_across_blocks(monkeypatch):
    from infra.search.embedded_vectors import top_rows

    rng = np.random.default_rng(0)
    matrix = rng.integers(-127, 128, size=(3000, 16), dtype=np.int8)
    scales = rng.uniform(0.001, 0.01, size=3000).astype(np.float32)
    queries = rng.normal(size=(5, 16)).astype(np.float32)
    monkeypatch.setattr(scale_child, "EXACT_BLOCK", 256)  # 12 blocks, the last one short
    kth = scale_child._exact_kth(matrix, scales, queries, 100)
    expected = [top_rows(matrix, scales, q, 100)[-1][1] for q in queries]
    assert kth == pytest.approx(expected, rel=1e-5)
    assert scale_child._exact_kth(matrix[:50], scales[:50], queries, 100) == pytest.approx(
        [top_rows(matrix[:50], scales[:50], q, 100)[-1][1] for q in queries], rel=1e-5
    )  # fewer rows than k: the worst of them


def test_the_dense_child_judges_each_share_of_the_ivf_lists(tmp_path, real):
    _, vectors = real
    # an IVF index from 1,000 rows on, so these 3,000 get one
    job, built = ingested(tmp_path, real, size=3000, index="d", dense_ann_rows=1000)
    settings = job["settings"]
    assert built["dense_index_mib"] > 0
    np.savez(tmp_path / "q.npz", vectors=vectors[:20], queries=np.array([]), gold=np.array([]))
    out = scale_child.dense({"settings": settings, "queries": str(tmp_path / "q.npz")})
    shares = out["dense_shares"]
    assert list(shares) == ["0.0625", "0.125", "0.25"] and out["dense_recall_questions"] == 20
    recall = [shares[s]["recall_at_100"] for s in shares]
    assert 0 < recall[0] <= recall[1] <= recall[2] <= 1  # more lists scanned, more found
    assert recall[0] < 1  # the control: a sixteenth of the lists misses some of the exact top 100


@pytest.mark.parametrize("command", ["scale", "dense"])
def test_sizes_that_are_not_whole_numbers_are_named(command):
    result = CliRunner().invoke(app, ["bench", command, "--sizes", "1e6"])
    assert "--sizes '1e6': give whole numbers" in str(result.exception)


def test_above_its_size_no_text_only_index_is_built_and_its_disk_is_the_text_files(
    monkeypatch, settings, tmp_path, real
):
    docs, _ = real
    monkeypatch.setattr(scale, "HuggingFaceEmbedder", lambda _: HashEmbedder())
    built = []

    def in_process(kind, work, job):  # the children's own functions, without an interpreter each
        built.append((kind, "vectors" in job))
        return scale_child.run(kind, job)

    monkeypatch.setattr(scale, "_child", in_process)
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    questions = gold_questions(docs)
    both = scale.bench_scale(settings, corpus, questions, [1500], ["embedded"])
    assert ("ingest", False) in built  # the control: at or below the size, both are built
    built.clear()
    one = scale.bench_scale(settings, corpus, questions, [1500], ["embedded"], text_only_up_to=1000)
    assert [b for b in built if b[0] == "ingest"] == [("ingest", True)]
    measured, derived = both["sizes"]["1500"]["embedded"], one["sizes"]["1500"]["embedded"]
    assert one["machine"]["cores"] >= 1 and one["machine"]["memory_gib"] > 0  # what it ran on
    assert one["machine"]["simd"] in {"avx512f", "avx2", "neon", None}
    assert derived["ingest_docs_per_s_without_vectors"] is None
    assert derived["ingest_docs_per_s_with_vectors"] > 0
    # the text files of the index with vectors weigh what the index without them did
    without = measured["disk_mib_without_vectors"]
    assert derived["disk_mib_without_vectors"] == pytest.approx(without, rel=0.1)
    assert derived["disk_mib_without_vectors"] < derived["disk_mib_with_vectors"]
    assert one["not_run"] == [
        {
            "size": 1500,
            "backend": "embedded text-only",
            "why": "above --text-only-up-to 1,000: disk from the text files",
        }
    ]


def test_a_failure_at_a_later_size_keeps_what_the_earlier_sizes_measured(
    monkeypatch, settings, tmp_path, real
):
    docs, _ = real
    monkeypatch.setattr(scale, "HuggingFaceEmbedder", lambda _: HashEmbedder())
    run_child = scale._child

    def in_process_until(failing):
        def child(kind, work, job):
            if job.get("size") == failing:  # a child that fails, in its own interpreter
                return run_child(kind, work, job | {"corpus": str(tmp_path / "missing.jsonl")})
            return scale_child.run(kind, job)

        return child

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    work = settings.home / "bench" / "scale"
    work.mkdir(parents=True)
    (work / scale.REPORT).write_text('{"sizes": {"1": "an earlier run"}}')
    ask = (settings, corpus, gold_questions(docs), [1500, 1600], ["embedded"])
    monkeypatch.setattr(scale, "_child", in_process_until(1500))
    with pytest.raises(RuntimeError) as first:
        scale.bench_scale(*ask, text_only_up_to=0)
    assert "measured before it" not in str(first.value)  # nothing was: no earlier run's file named
    monkeypatch.setattr(scale, "_child", in_process_until(1600))
    with pytest.raises(RuntimeError, match=r"measured before it: .*report\.json\): "):
        scale.bench_scale(*ask, text_only_up_to=0)
    kept = json.loads((work / scale.REPORT).read_text())
    assert kept["sizes"]["1500"]["embedded"]["bm25_top1000_p50_ms"] > 0
    assert kept["sizes"]["1500"]["bm25s"]["bm25s_recall_at_1000"] >= 0
    assert list(kept["sizes"]) == ["1500"]  # not the size it failed at


def cached_pages(path) -> int:
    """Return how many of the file's pages are in the page cache (mincore over a map of it)."""
    import ctypes
    import mmap
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    libc.mmap.argtypes += [ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        vector = (ctypes.c_ubyte * pages)()
        assert libc.mincore(address, size, vector) == 0, ctypes.get_errno()
        libc.munmap(address, size)
    finally:
        os.close(fd)
    return sum(byte & 1 for byte in vector)


def test_evicting_an_index_drops_its_files_from_the_page_cache(tmp_path):
    folder = tmp_path / "index"
    (folder / "segment").mkdir(parents=True)
    files = [folder / "rows.i8", folder / "segment" / "postings"]
    for number, path in enumerate(files):
        path.write_bytes(np.random.default_rng(number).bytes(2**20))  # 256 pages, dirty
    other = tmp_path / "elsewhere"
    other.write_bytes(b"x" * 2**20)
    for path in [*files, other]:
        path.read_bytes()
    assert all(cached_pages(path) == 256 for path in [*files, other])  # the control: cached
    assert query.evict(folder) == 2.0
    assert [cached_pages(path) for path in files] == [0, 0]
    assert cached_pages(other) == 256  # a file outside the index stays


def test_pubmeds_length_percentiles_come_from_whole_abstracts_context_and_conclusion(tmp_path):
    from lab.bench.synthetic import PUBMED_ABSTRACT_WORDS, abstract_word_percentiles

    records = {
        str(k): {"CONTEXTS": ["w " * k, "w " * k], "LONG_ANSWER": "w " * 10} for k in range(1, 101)
    }
    (tmp_path / "pqal.json").write_text(json.dumps(records))
    got = abstract_word_percentiles(tmp_path / "pqal.json")
    # 2k + 10 words each, k = 1..100: from 12 to 210, the conclusion counted
    assert len(got) == len(PUBMED_ABSTRACT_WORDS) == 21 and got[0] == 12 and got[-1] == 210
    assert got == sorted(got) and list(PUBMED_ABSTRACT_WORDS) == sorted(PUBMED_ABSTRACT_WORDS)


def test_the_benches_default_data_is_beside_the_checkout():
    # Both once counted their own parents, and after the lab's move both pointed at /shared:
    # `bench batch` said "no BioASQ golden files at /shared/data/bioasq/…" beside ../shared.
    from pathlib import Path

    from lab.bench import faults, scale
    from lab.shared_data import SHARED_DATA

    checkout = Path(__file__).resolve().parents[2]
    assert (checkout / "pyproject.toml").exists()
    assert SHARED_DATA == checkout.parent / "shared" / "data"
    assert faults.GOLDEN == SHARED_DATA / "bioasq" == scale.SHARED_QUESTIONS
    assert scale.SHARED_CORPUS == SHARED_DATA / "corpus" / "pubmed_docs.jsonl.gz"
