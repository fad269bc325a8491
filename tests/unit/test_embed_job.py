"""`quorum embed`'s job on the embedded engine: vectors added later, resumed, never twice."""

from collections import Counter

import numpy as np
import pytest

from infra.ingest.embed_job import EmbedJournal, embed_missing
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_store import EmbeddedWriter
from tests.support.counting import CountingEmbedder, Planted
from tests.support.fakes import HashEmbedder


def docs(n, start=0, word="aspirin"):
    return [
        {"pmid": str(1000 + i), "title": f"title {i}", "abstract": f"{word} trial number {i}"}
        for i in range(start, start + n)
    ]


def text(doc):
    return f"{doc['title']}. {doc['abstract']}"


def plain_index(path, n=100):
    writer = EmbeddedWriter(path)
    writer.upsert(docs(n), None)
    writer.close()


def run(path, embedder, **kw):
    writer = EmbeddedWriter(path, vectors_later=True)
    try:
        return embed_missing(
            writer, embedder, EmbedJournal(path / "embed.json", embedder.name), **kw
        )
    finally:
        writer.close()


def test_an_index_without_vectors_gets_every_vector_once(tmp_path):
    path = tmp_path / "i"
    plain_index(path)
    embedder = CountingEmbedder()
    report = run(path, embedder, batch_size=16, commit_every=32)
    assert report.embedded == 100 and set(embedder.seen.values()) == {1}
    index = EmbeddedIndex(path)
    assert index.meta["embedding_model"] == "hash-64" and index.meta["dims"] == 64
    expected = HashEmbedder().embed_documents([text(d) for d in docs(100)])
    got = index.vectors([d["pmid"] for d in docs(100)])
    assert np.allclose(got, expected, atol=4e-3)
    again = CountingEmbedder()
    assert run(path, again).embedded == 0 and again.calls == 0


def test_a_crash_after_some_batches_resumes_and_embeds_each_document_once(tmp_path):
    path = tmp_path / "i"
    plain_index(path, 100)
    first = CountingEmbedder(fail_on_call=5)  # four batches of 10 land, the fifth fails
    with pytest.raises(Planted):
        run(path, first, batch_size=10, commit_every=20)
    assert sum(first.seen.values()) == 40
    second = CountingEmbedder()
    report = run(path, second, batch_size=10, commit_every=20)
    assert report.embedded == 60 and report.earlier == 40
    assert first.seen + second.seen == Counter(text(d) for d in docs(100))
    index = EmbeddedIndex(path)
    assert np.all(np.any(index.vectors([d["pmid"] for d in docs(100)]), axis=1))


def test_vectors_written_but_not_committed_are_not_embedded_again(tmp_path):
    path = tmp_path / "i"
    plain_index(path, 50)
    first = CountingEmbedder(fail_on_call=4)
    with pytest.raises(Planted):  # three batches written, none committed (commit_every is big)
        run(path, first, batch_size=10, commit_every=1000)
    second = CountingEmbedder()
    run(path, second, batch_size=10)
    assert first.seen + second.seen == Counter(text(d) for d in docs(50))


def test_documents_indexed_later_without_vectors_are_the_only_ones_embedded(tmp_path):
    path = tmp_path / "i"
    plain_index(path, 30)
    run(path, CountingEmbedder())
    writer = EmbeddedWriter(path, vectors_later=True)  # as `quorum index --no-embeddings` opens it
    writer.upsert(docs(5, start=30, word="statin"), None)
    writer.upsert([{**docs(1)[0], "abstract": "revised aspirin"}], None)  # a re-indexed PMID
    writer.close()
    later = CountingEmbedder()
    assert run(path, later).embedded == 6
    assert later.seen == Counter(
        [text(d) for d in docs(5, start=30, word="statin")] + ["title 0. revised aspirin"]
    )
    index = EmbeddedIndex(path)
    assert index.count() == 35
    assert np.allclose(
        index.vectors(["1000"])[0],
        HashEmbedder().embed_query("title 0. revised aspirin"),
        atol=4e-3,
    )


def test_vectors_of_another_model_are_refused(tmp_path):
    path = tmp_path / "i"
    writer = EmbeddedWriter(path, dims=64, embedding_model="other-model")
    writer.upsert(docs(2), HashEmbedder().embed_documents(["a", "b"]))
    writer.close()
    with pytest.raises(ValueError, match="other-model"):
        run(path, CountingEmbedder())
