"""Relevance (infra/relevance.py, issue 55): a passage must address the question to be evidence.

The abstracts are the issue's own cases: the README question's answer cited an abstract on
mesial temporal sclerosis (from the shipped demo corpus), and after a 200,000-character reply
failed synthesis twice the ensemble's "KRAS", read from a lung-cancer abstract, stood in for
cystic fibrosis. Each refusal has its control, which the same call gives.
"""

import gzip
import json

import numpy as np
from langgraph.runtime import Runtime

from graphs.describe import trace_text
from infra.relevance import (
    count_frequencies,
    decide,
    judge_relevance,
    key_terms,
    reference_frequencies,
)
from infra.search.corpus import DEMO_DOCS
from nodes.answer_view import support_text
from nodes.synthesize import synthesize
from tests.support.fakes import script

LACE_Q = (
    "Do mitochondria play a role in remodelling lace plant leaves during programmed cell death?"
)
LACE, MTS = "21645374", "12790890"


def demo(*pmids):
    with gzip.open(DEMO_DOCS, "rt") as lines:
        docs = {d["pmid"]: d for d in map(json.loads, lines) if d["pmid"] in pmids}
    return [{**docs[p], "score": 1.0} for p in pmids]


class Blind:
    """An embedder whose every cosine is 0: the key terms alone decide."""

    dim = 4

    def embed_query(self, text):
        return np.array([1.0, 0, 0, 0], dtype=np.float32)

    def embed_documents(self, texts):
        return np.tile(np.array([0, 1.0, 0, 0], dtype=np.float32), (len(texts), 1))


class Near(Blind):
    """An embedder that puts every passage at cosine 0.5 from the question."""

    def embed_documents(self, texts):
        return np.tile(np.array([0.5, 0.866, 0, 0], dtype=np.float32), (len(texts), 1))


class Middling(Blind):
    """An embedder that puts every passage at cosine 0.3: a topic in common, no more."""

    def embed_documents(self, texts):
        return np.tile(np.array([0.3, 0.954, 0, 0], dtype=np.float32), (len(texts), 1))


def test_the_readme_question_s_own_abstract_is_on_it_and_the_cited_one_is_not():
    lace, mts = demo(LACE, MTS)
    judged = judge_relevance(LACE_Q, [lace, mts], Blind())
    assert judged[LACE].relevant and judged[LACE].terms == 1.0
    assert not judged[MTS].relevant and "lace" in judged[MTS].missing


def test_the_subject_decides_what_a_share_of_common_terms_cannot():
    # "gene" and "variant" stand in a haemochromatosis abstract; "warfarin" does not.
    question = "Which gene variants explain the variability of warfarin dose?"
    assert key_terms(question).subject == "warfarin"
    hfe = {
        "pmid": "3",
        "title": "Hereditary haemochromatosis",
        "abstract": "Most patients are homozygous for the C282Y variant of the HFE gene.",
    }
    near = judge_relevance(question, [hfe], Near())["3"]
    assert near.relevant  # at cosine 0.5 the embedder vouches for it without the subject
    # At cosine 0.3 its share and cosine together pass the bar (0.4 + 1.5 x 0.3 > 0.62): only
    # the subject rule refuses it.
    far = judge_relevance(question, [hfe], Middling())["3"]
    assert far.terms + 1.5 * far.cosine >= 0.62
    assert not far.relevant and far.subject is False
    # Control: the subject and the other terms together, with no cosine at all.
    warfarin = {**hfe, "pmid": "2", "abstract": "VKORC1 gene variants explain warfarin dose."}
    assert judge_relevance(question, [warfarin], Blind())["2"].relevant


def test_a_short_form_stands_for_the_words_it_abbreviates():
    question = "Which gene is mutated in hereditary angioedema?"
    passage = {"pmid": "1", "title": "", "abstract": "HAE is caused by SERPING1 mutations."}
    judged = judge_relevance(question, [passage], Blind())["1"]
    assert judged.subject and "angioedema" not in judged.missing
    other = {**passage, "abstract": "HIV is treated with cabotegravir."}
    assert "angioedema" in judge_relevance(question, [other], Blind())["1"].missing


def test_the_cross_encoder_can_refuse_but_never_accept():
    assert decide(0.3, 0.5, True, None) and not decide(0.3, 0.5, True, -2.0)
    assert decide(0.9, 0.0, True, -2.0)  # the key terms alone carry it
    assert not decide(0.0, 0.1, False, 8.0)  # a confident cross-encoder adds nothing


async def test_the_readme_answer_citing_an_abstract_off_the_question_is_never_given(make_context):
    # The demo model's "No", citing the mesial temporal sclerosis abstract (issue 55), then the
    # same decision standing in: refused on both, never "carried by the cited passages".
    reply = {
        "exact_answer": "no",
        "ideal_answer": "No. Cell death in mesial temporal sclerosis is not apoptotic.",
        "confidence": 0.8,
        "cited_pmids": [MTS],
    }
    decided = {
        "strategy": "permute_vote",
        "answers": [{"answer": "no", "support": 3.0, "cited": [MTS]}],
        "order": [LACE, MTS],
        "why": "3 of 3",
        "settings": {},
        "source": "ensemble",
    }
    state = {
        "question": LACE_Q,
        "qtype": "yesno",
        "organized": demo(LACE, MTS),
        "decision": decided,
        "attempts": [{"round": 0, "temperature": 0.1, "answer": {}, "error": "earlier"}],
    }
    update = await synthesize(state, Runtime(context=make_context(script(synthesize=reply))))
    answer = update["answer"]
    assert answer["source"] == "insufficient" and answer["exact"] == []
    assert "no cited passage addresses the question" in answer["insufficient"]
    assert update["relevance"][MTS]["relevant"] is False
    assert update["relevance"][LACE]["relevant"] is True
    shown = "\n".join(trace_text("synthesize", update)[0])
    assert "relevance: 1 of 2 passages address the question" in shown
    assert any(line.split()[:2] == [MTS, "NO"] for line in shown.splitlines())
    assert "relevance FAILED: no cited passage addresses the question" in shown
    # Control: the same reply citing the question's own abstract, in its words, is given.
    good = reply | {
        "exact_answer": "yes",
        "ideal_answer": "Yes. The role of mitochondria during programmed cell death in the lace "
        "plant was studied in its leaves.",
        "cited_pmids": [LACE],
    }
    state["question"] += " "  # another prompt: the reply cache holds the first
    state["decision"] = decided | {"answers": [{"answer": "yes", "support": 3.0, "cited": [LACE]}]}
    update = await synthesize(state, Runtime(context=make_context(script(synthesize=good))))
    assert update["answer"]["source"] == "synthesis", update["attempts"][0]["error"]
    result = {
        "support": {"verdict": "supported", "verified": "not verified"},
        "evidence": [{"pmid": LACE, "relevance": update["relevance"][LACE]}],
    }
    assert support_text(result).startswith("carried by the cited passages")


async def test_the_ensemble_s_stand_in_is_held_to_relevance_after_a_huge_reply(make_context):
    # Synthesis fails on a 200,000-character reply, twice; the ensemble decided "KRAS", read
    # from a lung-cancer abstract, for cystic fibrosis. It must not stand in.
    cf = {
        "pmid": "6",
        "title": "The CFTR gene in cystic fibrosis",
        "abstract": "Cystic fibrosis is caused by mutations in the CFTR gene. The F508del "
        "mutation of CFTR is found in most patients with cystic fibrosis.",
        "score": 1.0,
    }
    lung = {
        "pmid": "4",
        "title": "Driver mutations in non-small cell lung cancer",
        "abstract": "KRAS and EGFR mutations are the most common drivers of lung cancer. "
        "KRAS G12C can now be targeted by sotorasib.",
        "score": 0.9,
    }
    huge = "x" * 200_000

    def state(answer, cited):
        return {
            "question": "Which gene is mutated in cystic fibrosis?",
            "qtype": "factoid",
            "organized": [cf, lung],
            "decision": {
                "strategy": "permute_vote",
                "answers": [{"answer": answer, "support": 5.0, "cited": cited}],
                "order": ["6", "4"],
                "why": "5 of 5",
                "settings": {},
                "source": "ensemble",
            },
            "attempts": [{"round": 0, "temperature": 0.1, "answer": {}, "error": "too long"}],
        }

    ctx = make_context(script(synthesize=huge))
    update = await synthesize(state("KRAS", ["4"]), Runtime(context=ctx))
    answer = update["answer"]
    assert answer["source"] == "insufficient" and answer["exact"] == []
    assert "no cited passage addresses the question" in answer["insufficient"]
    assert update["relevance"]["4"]["relevant"] is False
    # The decision citing nothing: the stand-in is held to every shown passage on the question,
    # and none holds "KRAS"; the abstract that does is named as off the question.
    update = await synthesize(state("KRAS", []), Runtime(context=ctx))
    assert update["answer"]["source"] == "insufficient"
    assert (
        "carried only off the question: 'KRAS' (only in PMID 4)" in update["answer"]["insufficient"]
    )
    # Control: the ensemble's "CFTR", from the abstract on the question, stands in.
    update = await synthesize(state("CFTR", ["6"]), Runtime(context=ctx))
    assert update["answer"]["source"] == "vote" and update["answer"]["exact"] == ["CFTR"]
    assert update["answer"]["cited"] == ["6"]


def test_the_shipped_document_frequencies_are_a_fresh_count_of_the_reference():
    # Counted once, not at every run (~2 s); a change to the terms or the stemmer must rewrite it.
    assert reference_frequencies() == count_frequencies(), (
        "infra/data/pubmedqa_demo.df.json.gz is stale: "
        "run `uv run python tests/tools/make_demo_corpus.py --frequencies`"
    )
