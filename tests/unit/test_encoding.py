"""Embedding a corpus with texts tokenized ahead of the model: the same vectors as `encode`."""

import threading

import numpy as np
import pytest

from infra.corpus_encoder import (
    _ThreadTokenizer,
    batch_size_for,
    encode_corpus,
    encode_stream,
    workers_for,
)
from infra.embeddings import HuggingFaceEmbedder
from infra.settings import EmbeddingSettings
from tests.support.tiny_models import write_tiny_sentence_transformer

WORDS = ["protein", "gene", "cell", "cancer", "role", "mutation", "tumour", "patient", "drug"]


def texts(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 40))) for _ in range(n)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from sentence_transformers import SentenceTransformer

    path = write_tiny_sentence_transformer(tmp_path_factory.mktemp("st") / "m", seed=4)
    return SentenceTransformer(str(path), device="cpu")


@pytest.mark.parametrize(("workers", "batch_size"), [(1, 7), (3, 4), (2, 64)])
def test_pipelined_vectors_equal_encode_in_the_texts_order(model, workers, batch_size):
    corpus = texts(50)
    want = model.encode(corpus, normalize_embeddings=True, batch_size=16)
    got = encode_corpus(model, corpus, batch_size=batch_size, workers=workers)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


def test_no_workers_is_the_models_own_encode_and_nothing_is_nothing(model):
    corpus = texts(5, seed=1)
    plain = encode_corpus(model, corpus, batch_size=2, workers=0)
    np.testing.assert_allclose(plain, model.encode(corpus, normalize_embeddings=True), atol=1e-6)
    assert encode_corpus(model, [], batch_size=2, workers=2).shape[0] == 0


def test_every_thread_tokenizes_with_its_own_tokenizer(model):
    tokenize = _ThreadTokenizer(model)
    seen = []

    def work():
        tokenize(["cell gene"])
        seen.append(tokenize._local.rust)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(t) for t in seen}) == 3 and model[0].processor.backend_tokenizer not in seen


def test_batch_size_and_workers_follow_the_device_unless_set():
    assert batch_size_for("cpu", None) == 16 and batch_size_for("cuda", None) == 512
    assert batch_size_for("cuda", 32) == 32
    assert workers_for("cpu", None) == 0 and 1 <= workers_for("cuda", None) <= 4
    assert workers_for("cuda", 0) == 0 and workers_for("cpu", 3) == 3


def test_the_embedder_embeds_a_corpus_through_the_pipeline(tmp_path, model):
    path = write_tiny_sentence_transformer(tmp_path / "m", seed=4)
    embedder = HuggingFaceEmbedder(
        EmbeddingSettings(path=path, name="tiny", device="cpu", tokenize_workers=2, batch_size=8)
    )
    assert embedder.workers == 2 and embedder.batch_size == 8
    corpus = texts(20, seed=2)
    np.testing.assert_allclose(
        embedder.embed_corpus(corpus), embedder.embed_documents(corpus), atol=1e-5
    )


def test_the_rust_path_gives_preprocess_features_exactly_truncated_and_padded(model):
    tokenize = _ThreadTokenizer(model)
    assert tokenize._fixed is not None  # the fast path is taken for a BERT tokenizer
    corpus = [*texts(12, seed=3), " ".join(WORDS * 80), "cell"]  # past max_seq_length, and short
    want = model[0].preprocess(corpus)
    got = tokenize(corpus)
    assert set(got) == set(want)
    for key, value in want.items():
        if hasattr(value, "shape"):
            assert got[key].dtype == value.dtype and bool((got[key] == value).all()), key
        else:
            assert got[key] == value
    assert got["input_ids"].shape[1] <= model.max_seq_length


def test_a_model_without_a_fast_tokenizer_keeps_preprocess(model, monkeypatch):
    tokenize = _ThreadTokenizer(model)
    tokenize._fixed = None  # as for a model whose first module has no Rust tokenizer
    corpus = texts(6, seed=5)
    got, want = tokenize(corpus), model[0].preprocess(corpus)
    assert bool((got["input_ids"] == want["input_ids"]).all())
    assert tokenize._local.module.processor is not model[0].processor


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_a_stream_of_chunks_gives_each_chunk_its_own_vectors_in_order(model, workers):
    chunks = [texts(9, seed=5), [], texts(1, seed=6), texts(23, seed=7)]
    got = list(encode_stream(model, iter(chunks), batch_size=4, workers=workers))
    assert [g.shape[0] for g in got] == [9, 0, 1, 23]
    for chunk, vectors in zip(chunks, got, strict=True):
        if chunk:
            want = model.encode(chunk, normalize_embeddings=True, batch_size=16)
            np.testing.assert_allclose(vectors, want, atol=1e-5)


def test_the_stream_tokenizes_the_next_chunk_before_handing_back_this_one(model):
    pulled = []

    def chunks():
        for k in range(3):
            pulled.append(k)
            yield texts(2, seed=k)

    stream = encode_stream(model, chunks(), batch_size=4, workers=2)
    next(stream)
    # the first chunk is handed back only once the second is queued: the threads never idle
    # at a chunk's boundary (the negative control, one chunk at a time, would show [0])
    assert pulled == [0, 1, 2]
