"""`bench dense --elasticsearch`: the IVF stage and Elasticsearch's quantized graphs judged alike."""

from __future__ import annotations

import numpy as np

from lab.bench.dense import bench_dense

DIMS = 64  # bbq's smallest


def clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(12, DIMS))
    vectors = centres[rng.integers(12, size=n)] + 0.5 * rng.normal(size=(n, DIMS))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_both_engines_are_measured_against_the_same_exact_answer(
    settings, es_url, tmp_path, capsys
):
    docs = [{"pmid": str(i), "abstract": f"Sentence {i}. Another {i}."} for i in range(600)]
    chosen = settings.model_copy(
        update={"search": settings.search.model_copy(update={"elasticsearch_url": es_url})}
    )
    report = bench_dense(
        docs,
        clustered(600, 1),
        clustered(12, 2),
        [],
        [1.0, 1 / 16],
        work=tmp_path,
        elasticsearch=chosen,
        candidates=[1.0, 10.0],
    )
    assert capsys.readouterr().out == ""  # progress goes to stderr: --json prints one object
    real = report["sets"]["real"]
    assert real["rows"] == 600 and report["k"] == 100
    assert real["shares"]["1"]["recall_at_100"] == 1.0  # every list: the exact answer
    assert real["shares"]["0.0625"]["recall_at_100"] < 1.0  # the control: a few lists miss
    es = real["elasticsearch"]
    assert set(es) == {"int8_hnsw", "bbq_hnsw"}
    for kind in es.values():
        assert kind["vector_files_mib"] and set(kind["candidates"]) == {"1", "10"}
        assert kind["candidates"]["10"]["num_candidates"] == 1000
        assert 0.0 < kind["candidates"]["1"]["recall_at_100"] <= 1.0
    assert es["int8_hnsw"]["candidates"]["10"]["recall_at_100"] >= 0.95
