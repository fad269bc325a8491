"""`quorum embed`'s job on the embedded engine: vectors added later, resumed, never twice."""

import os
import threading
from collections import Counter

import numpy as np
import pytest

from infra.ingest.embed_job import EmbedJournal, ReadAhead, embed_missing
from infra.search.ann import AnnIndex
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_store import EmbeddedWriter
from infra.search.row_codes import RowCodes
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


def assert_hash_vectors(path, n):
    """The index's vectors are hash-64's of each document, every one of them."""
    index = EmbeddedIndex(path)
    assert (index.meta["embedding_model"], index.meta["dims"]) == ("hash-64", 64)
    expected = HashEmbedder().embed_documents([text(d) for d in docs(n)])
    assert np.allclose(index.vectors([d["pmid"] for d in docs(n)]), expected, atol=4e-3)
    return index


def test_an_index_without_vectors_gets_every_vector_once(tmp_path):
    path = tmp_path / "i"
    plain_index(path)
    embedder = CountingEmbedder()
    report = run(path, embedder, batch_size=16, commit_every=32)
    assert report.embedded == 100 and set(embedder.seen.values()) == {1}
    assert_hash_vectors(path, 100)
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


class Wide(CountingEmbedder):
    """Another model: 32 dimensions, another name (vectors the index held before)."""

    name, dim = "wide-32", 32


def other_model_index(path, n=40):
    writer = EmbeddedWriter(path, dims=32, embedding_model="wide-32")
    writer.upsert(docs(n), Wide().embed_documents([text(d) for d in docs(n)]))
    writer.close()


def test_vectors_of_another_model_are_computed_again_and_swapped_in(tmp_path):
    path = tmp_path / "i"
    other_model_index(path)
    embedder = CountingEmbedder()
    report = run(path, embedder, batch_size=16, commit_every=16)
    assert report.embedded == 40 and set(embedder.seen.values()) == {1}
    assert "reembed" not in assert_hash_vectors(path, 40).meta
    assert not list(path.glob("*.next.*"))
    again = CountingEmbedder()
    assert run(path, again).embedded == 0 and again.calls == 0


def test_the_old_models_ivf_index_and_row_codes_go_with_its_vectors(tmp_path):
    path = tmp_path / "i"
    other_model_index(path, 300)
    old = EmbeddedIndex(path)
    old.dense_stage(ann_rows=100, share=0.25, codes_rows=100)
    assert old.refresh_ann() is not None and old.refresh_row_codes() is not None
    assert AnnIndex.open(path) is not None and RowCodes.open(path) is not None  # the control
    run(path, CountingEmbedder(), batch_size=100, commit_every=100)
    index = assert_hash_vectors(path, 300)
    # Built from 32-dim vectors of another model: kept, they would name wrong candidates.
    assert AnnIndex.open(path) is None and RowCodes.open(path) is None
    index.dense_stage(ann_rows=100, share=0.25, codes_rows=100)
    assert index.refresh_ann().index.d == 64 and index.refresh_row_codes().centroids.shape[0] == 8


def test_a_killed_re_embedding_leaves_the_old_vectors_serving_and_resumes(tmp_path):
    path = tmp_path / "i"
    other_model_index(path)
    old = EmbeddedIndex(path).vectors(["1000", "1039"])
    first = CountingEmbedder(fail_on_call=3)  # two batches of 10 land, the third fails
    with pytest.raises(Planted):
        run(path, first, batch_size=10, commit_every=10)
    index = EmbeddedIndex(path)  # searches still see one model's vectors: the old one's
    assert (index.meta["embedding_model"], index.meta["dims"]) == ("wide-32", 32)
    assert np.array_equal(index.vectors(["1000", "1039"]), old)
    second = CountingEmbedder()
    report = run(path, second, batch_size=10, commit_every=10)
    assert report.embedded == 20 and report.earlier == 20
    assert first.seen + second.seen == Counter(text(d) for d in docs(40))
    index = EmbeddedIndex(path)
    assert index.meta["embedding_model"] == "hash-64"
    assert np.allclose(
        index.vectors(["1039"])[0], HashEmbedder().embed_query(text(docs(40)[39])), atol=4e-3
    )


def test_a_swap_cut_short_is_finished_when_the_index_next_opens(tmp_path, monkeypatch):
    path = tmp_path / "i"
    other_model_index(path, 5)
    real_replace = os.replace

    def crash_after_first_rename(src, dst):
        if str(src).endswith("scales.next.f32"):  # the vectors' file is already in place
            raise Planted("crash between the two renames")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_after_first_rename)
    with pytest.raises(Planted):
        run(path, CountingEmbedder())
    monkeypatch.setattr(os, "replace", real_replace)
    index = EmbeddedIndex(path)
    assert (index.meta["embedding_model"], index.meta["dims"]) == ("hash-64", 64)
    assert np.allclose(
        index.vectors(["1004"])[0], HashEmbedder().embed_query(text(docs(5)[4])), atol=4e-3
    )


class StreamingEmbedder(HashEmbedder):
    """A corpus stream, as a real model's: it reads the next chunk before handing one back."""

    def __init__(self, fail_after=None):
        self.chunks, self.fail_after = [], fail_after

    def embed_stream(self, chunks):
        chunks = iter(chunks)
        held = next(chunks, None)
        while held is not None:
            following = next(chunks, None)  # read ahead, as the tokenizing threads do
            self.chunks.append(len(held))
            if self.fail_after is not None and len(self.chunks) > self.fail_after:
                raise Planted("the model failed")
            yield self.embed_documents(held)
            held = following


def test_a_streaming_embedder_writes_each_batch_its_own_vectors(tmp_path):
    path = tmp_path / "i"
    plain_index(path, 100)
    embedder = StreamingEmbedder()
    report = run(path, embedder, batch_size=16, commit_every=32)
    assert report.embedded == 100 and embedder.chunks == [16] * 6 + [4]
    assert_hash_vectors(path, 100)


def test_a_stream_that_fails_commits_only_batches_written_and_resumes(tmp_path):
    path = tmp_path / "i"
    plain_index(path, 100)
    with pytest.raises(Planted):
        run(path, StreamingEmbedder(fail_after=3), batch_size=10, commit_every=20)
    report = run(path, StreamingEmbedder(), batch_size=10, commit_every=20)
    # two batches were committed; the third was written, not committed, and its vectors are
    # kept (as above); the fourth never came back from the model
    assert report.earlier == 20 and report.embedded == 70
    assert_hash_vectors(path, 100)


def test_read_ahead_keeps_order_and_raises_the_sources_error_in_the_consumer():
    def source():
        yield from range(5)
        raise Planted("index unreadable")

    got = []
    with pytest.raises(Planted, match="index unreadable"), ReadAhead(source(), 2) as items:
        got.extend(items)
    assert got == [0, 1, 2, 3, 4]


def test_leaving_read_ahead_early_stops_its_thread_and_closes_the_source():
    closed, made = threading.Event(), []

    def source():
        try:
            for k in range(1_000):
                made.append(k)
                yield k
        finally:
            closed.set()

    reader = ReadAhead(source(), 2)
    with reader as items:
        assert next(items) == 0
    assert closed.is_set() and not reader._thread.is_alive()
    assert len(made) < 10  # it read a few ahead, never the whole source
