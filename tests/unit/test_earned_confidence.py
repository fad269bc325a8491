"""Confidence earned from the evidence (nodes/synthesize/confidence.py), on planted cases."""

from __future__ import annotations

import pytest

from graphs.routers import needs_resynthesis
from nodes.synthesize.confidence import earned_confidence

PASSAGES = [
    {"pmid": "1", "title": "CFTR in cystic fibrosis", "abstract": "Mutations in CFTR cause it."},
    {"pmid": "2", "title": "KCNQ1 and the heart", "abstract": "KCNQ1 sets the QT interval."},
    {"pmid": "3", "title": "Nasal polyps", "abstract": "Polyposis recurs after surgery."},
    {"pmid": "4", "title": "Airway sodium", "abstract": "ENaC absorbs sodium in airways."},
]


def member(answer, pmids=("1",), error=None):
    return {
        "model": "m",
        "view": 0,
        "order": ["1", "2", "3"],
        "temperature": 0.0,
        "answer": [] if error else [answer],
        "pmids": [] if error else list(pmids),
        "raw": "",
        "error": error,
        "latency_s": 0.1,
        "tokens": 10,
    }


def decision(*rows, share):
    answers = [{"answer": a, "support": s, "cited": list(c)} for a, s, c in rows]
    return {
        "strategy": "permute_vote",
        "answers": answers,
        "order": ["1", "2", "3"],
        "why": "majority",
        "settings": {},
        "source": "ensemble",
        "share": share,
    }


def earned(members, decided, *, given=("CFTR",), cited=("1",), model=1.0, qtype="factoid"):
    return earned_confidence(
        qtype,
        model=model,
        given=list(given),
        cited=list(cited),
        decision=decided,
        members=members,
        passages=PASSAGES,
    )


AGREED = decision(("CFTR", 5.0, ["1"]), share=1.0)


def test_members_agreeing_on_a_cited_answer_leave_the_model_s_word_standing():
    got = earned([member("CFTR")] * 5, AGREED, model=0.9)
    assert got["confidence"] == 0.9 and got["parts"]["evidence"] == 1.0


def test_disagreement_lowers_it_to_the_decision_s_share():
    split = decision(("CFTR", 3.0, ["1"]), ("ENaC", 2.0, ["4"]), share=0.6)
    members = [member("CFTR")] * 3 + [member("ENaC", ("4",))] * 2
    assert earned(members, split)["confidence"] == 0.6
    # The synthesizer answering the minority's answer earns the minority's share.
    assert earned(members, split, given=("ENaC",), cited=("4",))["confidence"] == 0.4
    # ... and one nobody decided earns nothing.
    assert earned(members, split, given=("CLCN1",))["confidence"] == 0.0


def test_nobody_answering_can_never_give_a_confident_answer():
    failed = [member("", error="Connection error.")] * 5
    got = earned(failed, AGREED, model=1.0)  # even with a decision somehow standing
    assert got["confidence"] == 0.0 and got["parts"]["answered"] == 0.0


@pytest.mark.parametrize("model", [1.0, 0.95])
def test_citations_pointing_at_irrelevant_passages_keep_it_below_the_gate(model):
    # "CFTR" cited to a KCNQ1 paper and a nasal-polyposis paper (issue 27): the answer is
    # voted for by everybody, who cite the KCNQ1 paper too, but nothing cited holds it.
    members = [member("CFTR", ("2",))] * 5
    decided = decision(("CFTR", 5.0, ["2"]), share=1.0)
    got = earned(members, decided, cited=("3",), model=model)
    assert got["parts"]["citations"] == 0.0 and got["confidence"] == 0.4 < 0.5
    backed = earned(members, decided, cited=("1",), model=model)  # its text holds "CFTR"
    assert backed["confidence"] == model


def test_the_paper_s_gate_reads_the_synthesizer_s_own_word_not_the_earned_one():
    limits = {"min_confidence": 0.5, "max_attempts": 2}
    confident = {"confidence": 0.4, "model_confidence": 0.9, "source": "synthesis"}
    state = {"limits": limits, "attempts": [{"round": 0}], "answer": confident}
    assert needs_resynthesis(state) is False  # the model was sure: no second attempt
    unsure = confident | {"model_confidence": 0.3}
    assert needs_resynthesis(state | {"answer": unsure}) is True
    standing_in = unsure | {"source": "vote", "model_confidence": None}
    assert needs_resynthesis(state | {"answer": standing_in}) is False  # the rule step answered
