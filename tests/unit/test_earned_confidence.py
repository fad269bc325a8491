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


INDEPENDENT = {"verdict": "supported", "verified": {"status": "supported", "judge": "independent"}}
"""A support record whose verifier was another model than the answering one."""


def on(*pmids):
    """Return relevance verdicts: these PMIDs address the question, the others do not."""
    return {
        p["pmid"]: {"relevant": p["pmid"] in pmids, "terms": 0.5, "cosine": 0.5} for p in PASSAGES
    }


def earned(
    members,
    decided,
    *,
    given=("CFTR",),
    cited=("1",),
    model=1.0,
    qtype="factoid",
    support=INDEPENDENT,
    relevance=None,
    supported=1.0,
):
    return earned_confidence(
        qtype,
        model=model,
        given=list(given),
        cited=list(cited),
        decision=decided,
        members=members,
        passages=PASSAGES,
        supported=supported,
        relevance=on("1", "2", "3", "4") if relevance is None else relevance,
        support=support,
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


# --- issue 55: relevance, an independent judge, re-citing -------------------------------------


def test_members_agreeing_while_citing_passages_off_the_question_give_no_confidence():
    members = [member("CFTR", ("1",))] * 5
    assert earned(members, AGREED, relevance=on("1"))["confidence"] == 1.0
    # The same members and citations, with the passage they cite judged off the question.
    got = earned(members, AGREED, relevance=on("4"))
    assert got["parts"]["on_question"] == 0.0 and got["confidence"] == 0.0
    # Three of five cite a passage on the question: three fifths of the evidence.
    mixed = [member("CFTR", ("1",))] * 3 + [member("CFTR", ("2",))] * 2
    assert earned(mixed, AGREED, relevance=on("1"))["parts"]["on_question"] == 0.6


def test_a_citation_off_the_question_backs_nothing():
    members = [member("CFTR", ("1",))] * 5
    # 1 holds "CFTR", but judged off the question it is no evidence: the citations' floor.
    got = earned(members, AGREED, relevance=on("1"), cited=("1",))
    assert got["parts"]["citations"] == 1.0
    got = earned(members, AGREED, relevance={**on("1"), "1": {"relevant": False}}, cited=("1",))
    assert got["parts"]["citations"] == 0.0


@pytest.mark.parametrize(
    ("verified", "judge"),
    [
        ({"status": "supported", "judge": "self"}, "self"),
        ({"status": "supported"}, "self"),  # a record that names no judge: not independent
        ({"status": "not verified"}, "none"),  # the demo model
    ],
)
def test_an_answer_no_other_model_judged_is_capped_at_one_half(verified, judge):
    members = [member("CFTR")] * 5
    got = earned(
        members, AGREED, model=0.95, support={"verdict": "supported", "verified": verified}
    )
    assert got["confidence"] == 0.5 and got["parts"]["capped"] is True
    assert got["parts"]["judge"] == judge
    # Control: the same answer judged supported by another model keeps the model's word.
    got = earned(members, AGREED, model=0.95)
    assert got["confidence"] == 0.95 and got["parts"]["capped"] is False
    assert got["parts"]["judge"] == "independent"
    # Below the cap nothing changes: the cap lowers, never raises.
    low = earned(members, AGREED, model=0.3, support={"verified": verified})
    assert low["confidence"] == 0.3 and low["parts"]["capped"] is False


def test_a_list_s_confidence_is_scaled_by_its_carried_share():
    members = [member(["CFTR", "ENaC"])] * 5
    decided = decision((["CFTR", "ENaC"], 5.0, ["1", "4"]), share=1.0)
    full = earned(members, decided, qtype="list", given=("CFTR", "ENaC"), cited=("1", "4"))
    assert full["confidence"] == 1.0
    half = earned(
        members,
        decided,
        qtype="list",
        given=("CFTR", "ENaC"),
        cited=("1", "4"),
        supported=0.5,
    )
    assert half["confidence"] == 0.5 and half["parts"]["supported"] == 0.5


def test_a_re_cited_answer_is_scored_on_the_citations_it_gave():
    members = [member("CFTR", ("1",))] * 5
    support = INDEPENDENT | {"recited": {"from": ["3"], "to": ["1"]}}
    got = earned(members, AGREED, cited=("1",), support=support)
    assert got["parts"]["recited"] is True
    assert got["parts"]["citations"] == 0.0 and got["confidence"] == 0.4 < 0.5
    assert earned(members, AGREED, cited=("1",))["confidence"] == 1.0
