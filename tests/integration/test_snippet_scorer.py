"""Snippets chosen by a sentence cross-encoder (snippets.scorer_path), a tiny one built here."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.runtime import Runtime

from infra.settings import SettingsError, SnippetSettings
from infra.snippets import best_snippets, load_scorer, sentences
from nodes.finalize import finalize
from tests.support.fakes import HashEmbedder
from tests.support.tiny_models import write_tiny_cross_encoder

DOCS = [
    {
        "pmid": "201",
        "title": "Aspirin and colorectal cancer prevention",
        "abstract": "Daily aspirin lowered colorectal cancer incidence in a trial. "
        "Bleeding was rare among the participants of the trial. "
        "The cohort was followed for a decade by the investigators.",
    },
    {
        "pmid": "202",
        "title": "Statins in heart disease",
        "abstract": "Statins reduced cholesterol in most participants of the study. "
        "Aspirin users had fewer colorectal cancer cases in a secondary analysis.",
    },
]
QUESTION = "Does daily aspirin prevent colorectal cancer?"


@pytest.fixture(scope="module")
def scorer_dir(tmp_path_factory):
    """A 2-layer BERT cross-encoder (hidden 32; tests/support/tiny_models.py)."""
    return write_tiny_cross_encoder(tmp_path_factory.mktemp("models") / "sentence-scorer")


def all_sentences() -> list[str]:
    return [
        doc[section][b:e]
        for doc in DOCS
        for section in ("title", "abstract")
        for b, e in sentences(doc[section])
    ]


def test_snippets_follow_the_scorers_ranking_with_exact_offsets(scorer_dir):
    scorer = load_scorer(SnippetSettings(scorer_path=scorer_dir))
    texts = all_sentences()
    scores = scorer.score(QUESTION, texts)
    assert len(set(np.round(scores, 6))) > 1  # really scored, not a constant
    chosen = best_snippets(
        QUESTION, DOCS, HashEmbedder(), limit=20, per_doc=20, scorer=scorer, merge=False
    )
    assert [s["text"] for s in chosen] == [texts[i] for i in np.argsort(-scores, kind="stable")]
    assert [s["score"] for s in chosen] == sorted((s["score"] for s in chosen), reverse=True)
    merged = best_snippets(QUESTION, DOCS, HashEmbedder(), limit=20, per_doc=20, scorer=scorer)
    assert len(merged) < len(chosen)  # every sentence chosen: each section is one span
    by_pmid = {d["pmid"]: d for d in DOCS}
    for s in chosen + merged:
        doc = by_pmid[s["document"].rsplit("/", 1)[-1]]
        assert (
            doc[s["beginSection"]][s["offsetInBeginSection"] : s["offsetInEndSection"]]
            == (s["text"])
        )


async def test_finalize_uses_the_scorer_from_the_context(scorer_dir, make_context, settings):
    scorer = load_scorer(SnippetSettings(scorer_path=scorer_dir))
    limited = settings.model_copy(
        update={"snippets": settings.snippets.model_copy(update={"limit": 3, "per_document": 3})}
    )
    ctx = make_context(settings_=limited)
    ctx.snippet_scorer = scorer
    contexts = [{**d, "score": 1.0} for d in DOCS]
    state = {
        "question": QUESTION,
        "qtype": "yesno",
        "ranked": [("201", 1.0), ("202", 0.5)],
        "contexts": contexts,
    }
    result = (await finalize(state, Runtime(context=ctx)))["result"]
    expected = best_snippets(QUESTION, DOCS, ctx.embedder, limit=3, per_doc=3, scorer=scorer)
    assert result["snippets"] == expected and len(expected) == 3


def test_no_path_means_no_scorer_and_a_wrong_one_is_a_settings_error(tmp_path):
    assert load_scorer(SnippetSettings()) is None
    with pytest.raises(SettingsError, match=r"snippets\.scorer_path: no model at"):
        load_scorer(SnippetSettings(scorer_path=tmp_path))
