"""A query encoder distinct from the document encoder (MedCPT-style), with tiny models built here."""

from pathlib import Path

import numpy as np
import pytest

from infra.embeddings import HuggingFaceEmbedder, resolve_device
from infra.errors import UserError
from infra.search.backends import BACKENDS
from infra.settings import EmbeddingSettings, load_settings
from tests.support.tiny_models import write_tiny_sentence_transformer

TEXT = "what is the role of the protein in cancer"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("encoders")
    return {
        "documents": write_tiny_sentence_transformer(root / "documents", seed=1),
        "queries": write_tiny_sentence_transformer(root / "queries", seed=2),
        "narrow": write_tiny_sentence_transformer(root / "narrow", seed=3, dim=16),
    }


def encode(path: Path, text: str) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu")
    return model.encode([text], normalize_embeddings=True)[0]


def test_questions_use_the_query_encoder_and_documents_the_document_encoder(models):
    embedder = HuggingFaceEmbedder(
        EmbeddingSettings(
            path=models["documents"], query_path=models["queries"], name="tiny-doc", device="cpu"
        )
    )
    query = embedder.embed_query(TEXT)
    assert np.allclose(query, encode(models["queries"], TEXT), atol=1e-5)
    assert not np.allclose(query, encode(models["documents"], TEXT), atol=1e-3)
    docs = embedder.embed_documents([TEXT, "cell gene"])
    assert np.allclose(docs[0], encode(models["documents"], TEXT), atol=1e-5)
    symmetric = HuggingFaceEmbedder(EmbeddingSettings(path=models["documents"], device="cpu"))
    assert np.allclose(symmetric.embed_query(TEXT), docs[0], atol=1e-5)


def test_the_index_records_the_document_model(models, tmp_path):
    settings = load_settings(
        home=tmp_path / "home",
        embeddings={
            "path": str(models["documents"]),
            "query_path": str(models["queries"]),
            "name": "tiny-doc",
            "device": "cpu",
        },
    )
    embedder = HuggingFaceEmbedder(settings.embeddings)
    writer = BACKENDS["embedded"].open_writer(settings, embedder)
    writer.upsert(
        [{"pmid": "1", "title": "cell", "abstract": "gene"}],
        embedder.embed_documents(["cell. gene"]),
    )
    writer.close()
    assert writer.meta["embedding_model"] == "tiny-doc"


def test_a_query_encoder_of_another_width_is_refused(models):
    settings = EmbeddingSettings(path=models["documents"], query_path=models["narrow"])
    with pytest.raises(UserError, match="16-dimensional vectors but the document model gives 32"):
        HuggingFaceEmbedder(settings.model_copy(update={"device": "cpu"}))
    with pytest.raises(UserError, match="no embedding model at"):
        HuggingFaceEmbedder(EmbeddingSettings(path=models["documents"] / "missing"))


def test_auto_device_is_the_gpu_when_there_is_one():
    import torch

    assert resolve_device("cpu") == "cpu"
    expected = "cuda" if torch.cuda.is_available() else None
    if expected:
        assert resolve_device("auto") == "cuda" and resolve_device("cuda") == "cuda"
    else:
        assert resolve_device("auto") in ("cpu", "mps")
        with pytest.raises(UserError, match=r"embeddings\.device is cuda"):
            resolve_device("cuda")


def test_local_chat_weights_take_a_half_type_on_an_accelerator(monkeypatch):
    import torch

    from infra.local_models import torch_dtype

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert torch_dtype("auto", "cuda") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert torch_dtype("auto", "cuda") == torch.float16  # an older GPU
    assert torch_dtype("auto", "mps") == torch.float16
    assert torch_dtype("auto", "cpu") in (torch.bfloat16, torch.float32)  # as the CPU computes
    assert torch_dtype("float32", "cuda") == torch.float32  # a setting wins


def test_a_cpu_gets_bfloat16_where_it_computes_it_and_float32_where_torch_cannot_say(monkeypatch):
    import torch

    from infra.local_models import torch_dtype

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert torch_dtype("auto", "cpu") == torch.bfloat16
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert torch_dtype("auto", "cpu") == torch.float32
    # A torch without the private checks loads in float32 rather than failing.
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert torch_dtype("auto", "cpu") == torch.float32
