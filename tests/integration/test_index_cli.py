"""`quorum index` end to end: JSONL and PubMed XML into the embedded engine, re-runs, kill -9 and resume."""

import gzip
import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_layout import row_pmids
from tests.support.cli import QUORUM, quorum, quorum_env, run_quorum
from tests.support.data import CORPUS, PUBMED_FIXTURES


def corpus(tmp_path: Path, n: int, name="docs.jsonl.gz") -> Path:
    path = tmp_path / name
    with gzip.open(CORPUS, "rt") as src, gzip.open(path, "wt") as out:
        lines = src.readlines()[:n]
        assert len(lines) == n, f"the corpus excerpt has {len(lines)} documents, not {n}"
        out.writelines(lines)
    return path


def positions(journal: Path) -> dict[str, int]:
    """Return how far each source got, from an ingestion journal (it may be mid-write)."""
    try:
        return json.loads(journal.read_text()).get("positions", {})
    except ValueError:
        return {}


def test_index_into_shards_then_a_new_shard_count_is_named_not_applied(tmp_path):
    def index(source: Path, shards: int) -> subprocess.CompletedProcess:
        args = ["index", str(source), "--index", "sharded", "--no-embeddings"]
        return quorum(tmp_path, *args, QUORUM_SEARCH__EMBEDDED_SHARDS=str(shards))

    first = index(corpus(tmp_path, 300), 2)
    assert first.returncode == 0, first.stderr
    assert "keeps its" not in first.stderr
    built = EmbeddedIndex(tmp_path / "indexes" / "sharded")
    assert built.shards == 2 and built.count() == 300
    again = index(corpus(tmp_path, 400, name="more.jsonl.gz"), 3)  # 300 again, 100 new
    assert again.returncode == 0, again.stderr
    assert "keeps its 2 shards: search.embedded_shards (3) applies to new indexes" in again.stderr
    grown = EmbeddedIndex(tmp_path / "indexes" / "sharded")
    assert grown.shards == 2 and grown.count() == 400  # the 300 re-indexed left no old copy


def test_index_jsonl_then_rerun_adds_nothing(tmp_path):
    source = corpus(tmp_path, 500)
    first = quorum(tmp_path, "index", str(source), "--index", "small", "--no-embeddings")
    assert first.returncode == 0, first.stderr
    assert "indexed 500 documents" in first.stderr and "docs/s" in first.stderr
    again = quorum(tmp_path, "index", str(source), "--index", "small", "--no-embeddings")
    assert "indexed 0 documents" in again.stderr and "resumed past 500" in again.stderr
    index = EmbeddedIndex(tmp_path / "indexes" / "small")
    assert index.count() == 500


def test_index_pubmed_xml_applies_deletions(tmp_path):
    base = tmp_path / "base.jsonl"
    base.write_text(
        "".join(
            json.dumps({"pmid": p, "title": "t", "abstract": "old"}) + "\n"
            for p in ("90000021", "90000022", "5")
        )
    )
    quorum(tmp_path, "index", str(base), "--index", "x", "--no-embeddings")
    done = quorum(
        tmp_path,
        "index",
        str(PUBMED_FIXTURES / "update_sample.xml"),
        "--index",
        "x",
        "--no-embeddings",
    )
    assert done.returncode == 0, done.stderr
    assert "indexed 2 documents, deleted 2" in done.stderr
    index = EmbeddedIndex(tmp_path / "indexes" / "x")
    assert index.count() == 3
    assert not index.has("90000021") and not index.has("90000022")
    assert index.fetch(["90000011"])[0]["abstract"] == "First revised abstract."


def test_killed_run_resumes_without_duplicates(tmp_path):
    source = corpus(tmp_path, 400)
    args = [
        QUORUM,
        "index",
        str(source),
        "--index",
        "big",
        "--batch-size",
        "20",
        "--commit-every",
        "40",
    ]
    proc = subprocess.Popen(
        args, env=quorum_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    journal = tmp_path / "indexes" / "big" / "ingest-journal.json"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if journal.exists() and max(positions(journal).values(), default=0) >= 80:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    committed = max(positions(journal).values())
    assert 80 <= committed < 400
    resumed = quorum(tmp_path, "index", str(source), "--index", "big", "--batch-size", "50")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed past {committed:,}" in resumed.stderr
    index = EmbeddedIndex(tmp_path / "indexes" / "big")
    assert index.count() == 400
    rows = row_pmids(tmp_path / "indexes" / "big")
    assert len(set(rows)) == 400  # every document once, vectors aligned
    vectors = index.vectors(rows[:5])
    assert vectors.shape == (5, 384)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.jsonl", "no such file"),
        (lambda p: (p / "a.csv").write_text("x") and p / "a.csv", "unsupported file type"),
        (
            lambda p: (p / "b.jsonl.gz").write_bytes(b"plain") and p / "b.jsonl.gz",
            "not a gzip file",
        ),
        (
            lambda p: (p / "c.jsonl").write_text('{"pmid": "1"}\n{oops\n') and p / "c.jsonl",
            "c.jsonl:2: not JSON",
        ),
    ],
)
def test_bad_sources_are_one_line_errors(tmp_path, make, message):
    done = quorum(tmp_path, "index", str(make(tmp_path)), "--index", "bad", "--no-embeddings")
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_index_into_elasticsearch_jsonl_and_xml(tmp_path, es_url, new_name):
    name = new_name()
    source = corpus(tmp_path, 300)
    run_env = quorum_env(tmp_path) | {
        "QUORUM_SEARCH__BACKEND": "elasticsearch",
        "QUORUM_SEARCH__ELASTICSEARCH_URL": es_url,
    }

    def run(*args):
        return run_quorum(run_env, "index", *args, "--index", name, "--no-embeddings")

    first = run(str(source))
    assert first.returncode == 0, first.stderr
    assert "indexed 300 documents" in first.stderr
    again = run(str(source))
    assert "resumed past 300" in again.stderr
    xml = run(str(PUBMED_FIXTURES / "update_sample.xml"))
    assert xml.returncode == 0 and "indexed 2 documents" in xml.stderr
    from infra.search.elastic import ElasticIndex

    index = ElasticIndex(es_url, name)
    assert (
        index.count() == 302
        and index.fetch(["90000011"])[0]["abstract"] == "First revised abstract."
    )


def test_vectors_mismatch_is_a_one_line_error(tmp_path):
    source = corpus(tmp_path, 20)
    assert quorum(tmp_path, "index", str(source), "--index", "m", "--no-embeddings").returncode == 0
    mixed = quorum(tmp_path, "index", str(source), "--index", "m")
    assert mixed.returncode == 2 and "holds no vectors; this run would write" in mixed.stderr
    assert "Traceback" not in mixed.stderr


def test_a_deleted_index_is_rebuilt_not_skipped(tmp_path):
    import shutil

    source = corpus(tmp_path, 30)
    assert (
        quorum(tmp_path, "index", str(source), "--index", "gone", "--no-embeddings").returncode == 0
    )
    shutil.rmtree(tmp_path / "indexes" / "gone")
    again = quorum(tmp_path, "index", str(source), "--index", "gone", "--no-embeddings")
    assert "indexed 30 documents" in again.stderr
    assert EmbeddedIndex(tmp_path / "indexes" / "gone").count() == 30


def test_an_out_of_range_year_is_a_one_line_error_and_the_index_stays_usable(tmp_path):
    path = tmp_path / "years.jsonl"
    rows = [
        {"pmid": str(i), "title": "t", "abstract": "aspirin", "year": 2000} for i in range(1, 4)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert quorum(tmp_path, "index", str(path), "--index", "y").returncode == 0
    rows.append({"pmid": "4", "title": "t", "abstract": "aspirin", "year": 10**20})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = quorum(tmp_path, "index", str(path), "--index", "y")
    assert done.returncode == 2 and "year" in done.stderr and "years.jsonl" in done.stderr
    assert "Traceback" not in done.stderr
    index = EmbeddedIndex(tmp_path / "indexes" / "y")  # opens: rows and vectors still aligned
    assert index.count() == 3  # an index that existed is kept, whatever the failed run did


def test_a_failed_index_leaves_no_empty_index_and_ask_then_says_it_is_missing(tmp_path):
    bad = Path(__file__).resolve().parents[1] / "fixtures" / "hostile" / "corpus_bad_line.jsonl"
    failed = quorum(tmp_path, "index", str(bad), "--index", "fresh", "--no-embeddings")
    assert failed.returncode == 2 and "corpus_bad_line.jsonl:2" in failed.stderr
    assert not (tmp_path / "indexes" / "fresh").exists()
    asked = quorum(tmp_path, "ask", "Is aspirin effective?", "--index", "fresh")
    assert asked.returncode == 2, asked.stderr
    assert "index 'fresh' does not exist" in asked.stderr
    assert "quorum index FILE... --index fresh" in asked.stderr


def test_records_left_out_are_named_one_line_each(tmp_path):
    source = tmp_path / "corpus.jsonl"
    big = json.dumps({"pmid": "2", "title": "t", "abstract": "x" * 1_100_000})
    source.write_text(
        json.dumps({"pmid": "1", "title": "aspirin", "abstract": "colorectal cancer"})
        + "\n"
        + big
        + "\n"
    )
    proc = quorum(tmp_path, "index", str(source), "--index", "sized", "--no-embeddings")
    assert proc.returncode == 0, proc.stderr
    assert (
        f"skipped {source}:2: 1,100,0" in proc.stderr and "left out 1 (named above)" in proc.stderr
    )
    assert "indexed 1 document," in proc.stderr


def test_reindexing_unchanged_files_loads_no_model(tmp_path):
    source = tmp_path / "few.jsonl"
    source.write_text(
        "".join(
            json.dumps({"pmid": str(i), "title": f"aspirin {i}", "abstract": "colorectal"}) + "\n"
            for i in range(1, 6)
        )
    )
    first = quorum(tmp_path, "index", str(source), "--index", "few")
    assert first.returncode == 0 and "indexed 5 documents" in first.stderr, first.stderr
    # A model that cannot load: the re-run succeeds only because it never tries.
    no_model = str(tmp_path / "no-such-model")
    again = quorum(
        tmp_path, "index", str(source), "--index", "few", QUORUM_EMBEDDINGS__PATH=no_model
    )
    assert again.returncode == 0, again.stderr
    assert "indexed 0 documents" in again.stderr and "resumed past 5" in again.stderr


def test_an_index_with_enough_vectors_gets_its_ivf_index(tmp_path):
    source = corpus(tmp_path, 200)
    run = quorum(
        tmp_path, "index", str(source), "--index", "dense", QUORUM_SEARCH__DENSE_ANN_ROWS="100"
    )
    assert run.returncode == 0, run.stderr
    assert "built the dense stage's IVF index: 200 rows in 64 lists" in run.stderr
    index = EmbeddedIndex(tmp_path / "indexes" / "dense")
    index.dense_stage(ann_rows=100, share=0.25)
    vector = index._vectors[7].astype(np.float32) * index._scales[7]
    assert index.nearest(vector, 1)[0][0] == row_pmids(tmp_path / "indexes" / "dense")[7]
