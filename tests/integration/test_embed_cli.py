"""`quorum embed` end to end with a tiny model built here: killed, resumed, on both backends."""

import gzip
import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from graphs.cli.embed import embed
from infra.ingest.session import IngestSession
from infra.ingest.sources import normalize
from infra.search.corpus import IndexMissing
from infra.search.elastic import ElasticIndex
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_layout import row_pmids
from infra.search.embedded_store import EmbeddedWriter
from infra.settings import load_settings
from tests.support.cli import QUORUM, quorum_env
from tests.support.data import CORPUS
from tests.support.tiny_models import write_tiny_sentence_transformer


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer BERT sentence-transformers model (hidden 32), saved for the CLI to load."""
    return write_tiny_sentence_transformer(tmp_path_factory.mktemp("models") / "st")


def documents(n: int) -> list[dict]:
    """Return the first `n` documents of the corpus excerpt, as ingestion reads them."""
    with gzip.open(CORPUS, "rt") as src:
        return [normalize(json.loads(line)) for line in src.readlines()[:n]]


def runs(journal: Path) -> list[int]:
    try:
        return json.loads(journal.read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return []


def embedded(settings, *, batch_size: int, commit_every: int, notes: list[str] | None = None):
    """Embed the configured index through the ingest session `quorum embed` runs."""
    with IngestSession(settings) as session:
        session.open_vectors(on_note=(notes if notes is not None else []).append)
        return session.embed(batch_size=batch_size, commit_every=commit_every)


def test_a_killed_embed_resumes_and_fills_every_vector(tmp_path, tiny_model, monkeypatch, capsys):
    env = quorum_env(tmp_path) | {
        "QUORUM_EMBEDDINGS__PATH": str(tiny_model),
        "QUORUM_EMBEDDINGS__NAME": "tiny",
    }
    writer = EmbeddedWriter(tmp_path / "indexes" / "late")  # as `--no-embeddings` leaves it
    writer.upsert(documents(700), None)
    writer.close()
    args = ["embed", "--index", "late", "--batch-size", "20", "--commit-every", "20"]
    proc = subprocess.Popen(
        [QUORUM, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    journal = tmp_path / "indexes" / "late" / "embed-ingest-journal.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and sum(runs(journal)) < 20:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    earlier = sum(runs(journal))
    assert 0 < earlier < 700
    for key, value in env.items():  # the same command again, in this process (no start-up)
        monkeypatch.setenv(key, value)
    embed(name="late", batch_size=20, commit_every=20)
    said = capsys.readouterr().err
    assert f"({earlier:,} more by earlier runs) into embedded:late" in said, said
    # The batch in flight at the kill may have landed uncounted: it is not embedded again.
    now = runs(journal)[-1]
    assert f"embedded {now:,} documents" in said
    assert 700 - 20 <= earlier + now <= 700
    index = EmbeddedIndex(tmp_path / "indexes" / "late")
    rows = row_pmids(tmp_path / "indexes" / "late")
    vectors = index.vectors(rows)
    assert vectors.shape == (700, 32) and np.all(np.any(vectors, axis=1))
    assert index.meta["embedding_model"] == "tiny"


def test_embed_on_elasticsearch_through_the_command(tmp_path, tiny_model, es_url, new_name):
    name = new_name()
    plain = ElasticIndex(es_url, name, create=True)
    plain.upsert(documents(120), None)
    plain.close()
    settings = load_settings(
        home=tmp_path,
        search={"backend": "elasticsearch", "elasticsearch_url": es_url, "index": name},
        embeddings={"path": tiny_model, "name": "tiny"},
    )
    report = embedded(settings, batch_size=50, commit_every=50)
    assert report.embedded == 120 and report.earlier == 0
    index = ElasticIndex(es_url, name)
    assert index.dims == 32 and index.count_unembedded() == 0
    assert embedded(settings, batch_size=50, commit_every=50).embedded == 0


def test_a_missing_index_is_named_before_any_model_loads(tmp_path):
    settings = load_settings(
        home=tmp_path, search={"index": "nowhere"}, embeddings={"path": tmp_path / "no-model"}
    )
    with (
        pytest.raises(IndexMissing, match=r"index 'nowhere' does not exist.*--no-embeddings"),
        IngestSession(settings) as session,
    ):
        session.embed(batch_size=10, commit_every=10)


def test_an_index_is_embedded_again_for_a_newly_configured_model(tmp_path, tiny_model):
    trained = write_tiny_sentence_transformer(tmp_path / "trained", seed=3, dim=16)
    old = load_settings(
        home=tmp_path, search={"index": "kb"}, embeddings={"path": tiny_model, "name": "tiny"}
    )
    writer = EmbeddedWriter(old.index_dir, dims=32, embedding_model="tiny")
    writer.upsert(documents(60), np.ones((60, 32), dtype=np.float32))
    writer.close()
    new = load_settings(
        home=tmp_path, search={"index": "kb"}, embeddings={"path": trained, "name": "trained"}
    )
    notes: list[str] = []
    report = embedded(new, batch_size=25, commit_every=25, notes=notes)
    assert report.embedded == 60
    index = EmbeddedIndex(new.index_dir)
    assert (index.meta["embedding_model"], index.meta["dims"]) == ("trained", 16)
    vectors = index.vectors(row_pmids(new.index_dir))
    assert vectors.shape == (60, 16) and np.all(np.any(vectors, axis=1))
    assert "holds tiny vectors: computing trained's beside them" in notes[0]
    assert embedded(new, batch_size=25, commit_every=25).embedded == 0
