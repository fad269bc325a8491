"""Cross-encoder loading and scoring, with a tiny BERT cross-encoder built in the test (no hub)."""

import numpy as np
import pytest
from langgraph.runtime import Runtime

from infra.rerankers import FlagReranker, SentenceTransformersReranker, load_reranker
from infra.settings import CrossEncoderSettings
from nodes.rerank import rerank
from tests.support.fakes import script
from tests.support.tiny_models import write_tiny_cross_encoder


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    return write_tiny_cross_encoder(tmp_path_factory.mktemp("models") / "tiny-ce")


@pytest.mark.parametrize("kind", ["sentence-transformers", "flag"])
def test_both_loaders_score_pairs_deterministically(tiny_cross_encoder, kind):
    settings = CrossEncoderSettings(path=tiny_cross_encoder, kind=kind, max_length=64)
    reranker = load_reranker(settings)
    assert isinstance(reranker, FlagReranker if kind == "flag" else SentenceTransformersReranker)
    passages = ["aspirin trial in cancer", "lace plant cell death", "statin"]
    first = reranker.score("aspirin cancer", passages)
    assert first.shape == (3,) and first.dtype == np.float32 and np.isfinite(first).all()
    assert np.allclose(first, reranker.score("aspirin cancer", passages))
    assert len(set(np.round(first, 6))) > 1  # the pairs are really scored, not a constant


def test_loaders_agree_on_the_same_weights(tiny_cross_encoder):
    passages = ["aspirin trial", "mitochondria lace plant", "cell death in cancer"]
    st = load_reranker(CrossEncoderSettings(path=tiny_cross_encoder, max_length=64)).score(
        "aspirin", passages
    )
    flag = load_reranker(
        CrossEncoderSettings(path=tiny_cross_encoder, kind="flag", max_length=64)
    ).score("aspirin", passages)
    assert np.argsort(st).tolist() == np.argsort(flag).tolist()


def test_unset_path_means_no_reranker_and_a_bad_one_fails_clearly(tmp_path):
    assert load_reranker(CrossEncoderSettings()) is None
    with pytest.raises(FileNotFoundError, match="no model at"):
        load_reranker(CrossEncoderSettings(path=tmp_path))


async def test_rerank_node_reorders_the_head_by_cross_encoder(
    make_context, settings, tiny_cross_encoder
):
    configured = settings.model_copy(
        update={
            "rerank": settings.rerank.model_copy(
                update={
                    "cross_encoder": CrossEncoderSettings(
                        path=tiny_cross_encoder, top_n=3, max_length=64, weight=1.0
                    )
                }
            )
        }
    )
    ctx = make_context(script(), settings_=configured)
    ctx.reranker = load_reranker(configured.rerank.cross_encoder)
    candidates = [("101", 5.0), ("102", 4.0), ("103", 3.0), ("106", 2.0), ("107", 1.0)]
    update = await rerank(
        {"question": "mitochondria lace plant", "candidates": candidates}, Runtime(context=ctx)
    )
    head = [p for p, _ in update["ranked"][:3]]
    assert set(head) == {"101", "102", "103"}  # the head is rescored, not replaced
    node_scores = [s for _, s in update["ranked"][:3]]
    assert node_scores == sorted(node_scores, reverse=True)
    # weight 1: the cross-encoder's scores alone, min-max normalised over the head. This tiny
    # random model scores every pair within 1e-6 of the others, so the exact blend is tested
    # with a scripted scorer (tests/unit/test_nodes.py); here, that the real model is called.
    assert node_scores[0] == 1.0 and node_scores[-1] == 0.0
    assert any("cross-encoder rescored the top 3 (weight 1)" in n for n in update["notes"])
