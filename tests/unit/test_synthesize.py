"""synthesize reads the strategy's decision and its evidence order, never the vote table."""

import pytest
from langgraph.runtime import Runtime

from graphs.describe import trace_text
from nodes.descriptions.synthesize import STAND_IN_LINE
from nodes.synthesize import synthesize
from tests.support.fakes import pmids_in, script

QUESTION = "Which channel is mutated in cystic fibrosis?"


def decision(*answers, order=("103", "101"), why="CCV: 2 valid citations of 103", share=0.6):
    return {
        "strategy": "ccv",
        "answers": [{"answer": a, "support": s, "cited": list(c)} for a, s, c in answers],
        "order": list(order),
        "why": why,
        "settings": {"members": 20, "evidence": "relaxed"},
        "source": "ensemble",
        "share": share,
    }


# The majority said CFTR; the strategy decided ENaC: synthesis must hear the decision.
MAJORITY = {"ranked": ["CFTR"], "table": [{"answer": "CFTR", "votes": 3, "normalized": "cftr"}]}
DECIDED = decision(("ENaC", 2.0, ["103"]), ("CFTR", 1.0, ["101", "102"]))


def with_mode(settings, mode):
    return settings.model_copy(
        update={"synthesis": settings.synthesis.model_copy(update={"mode": mode})}
    )


# What the abstracts say: CFTR in 101 and 102, ENaC in 103 (the support check reads them).
PASSAGES = [
    {
        "pmid": "101",
        "title": "CFTR and cystic fibrosis",
        "abstract": "Mutations in CFTR cause cystic fibrosis in most patients. "
        "Mitochondrial dynamics change early during programmed cell death.",
        "score": 0.9,
    },
    {
        "pmid": "102",
        "title": "Chloride transport in airway epithelia",
        "abstract": "CFTR conducts chloride across airway epithelia.",
        "score": 0.8,
    },
    {
        "pmid": "103",
        "title": "Sodium channels in the airway",
        "abstract": "ENaC hyperactivity dehydrates the airway surface in cystic fibrosis.",
        "score": 0.7,
    },
]


def state_for(index, qtype="factoid", decided=DECIDED, **extra):
    return {
        "question": QUESTION,
        "qtype": qtype,
        "organized": [dict(p) for p in PASSAGES],
        "votes": MAJORITY,
        "decision": decided,
        **extra,
    }


def synthesis_reply(exact, confidence=0.8, cited=("103",)):
    return {
        "exact_answer": exact,
        "ideal_answer": "It is ENaC.",
        "confidence": confidence,
        "cited_pmids": list(cited),
    }


async def test_llm_mode_reads_the_decision_and_its_order(make_context, index):
    model = script(synthesize=synthesis_reply(["ENaC"]))
    update = await synthesize(state_for(index), Runtime(context=make_context(model)))
    prompt = model.calls[0]["messages"][-1].content
    assert pmids_in(model.calls[0]["messages"]) == ["103", "101"]  # the decision's order
    assert 'Ensemble decision: "ENaC"\nWhy: CCV: 2 valid citations of 103' in prompt
    assert 'Other answers (support): [["CFTR", 1.0]]' in prompt
    assert "votes" not in prompt.lower()  # never the majority table
    answer = update["answer"]
    assert answer["exact"] == ["ENaC"] and answer["overrode_decision"] is False
    assert update["attempts"][0]["temperature"] == 0.1 and update["notes"] == []


async def test_llm_mode_records_when_the_synthesizer_overrides_the_decision(make_context, index):
    model = script(synthesize=synthesis_reply(["CFTR", "ENaC"], cited=("101",)))
    update = await synthesize(state_for(index), Runtime(context=make_context(model)))
    assert update["answer"]["overrode_decision"] is True
    assert update["notes"] == [
        "synthesize: answered 'CFTR; ENaC' over the ccv decision 'ENaC; CFTR'"
    ]
    assert "  overrode the ensemble's decision" in trace_text("synthesize", update)[0]


async def test_vote_mode_makes_the_decision_final_without_a_model_call(
    make_context, settings, index
):
    model = script(synthesize=RuntimeError("no model may be called in vote mode"))
    ctx = make_context(model, settings_=with_mode(settings, "vote"))
    update = await synthesize(state_for(index), Runtime(context=ctx))
    assert model.calls == [] and "calls" not in update
    answer = update["answer"]
    # The decision's ranking (up to five), not the majority's CFTR; CFTR is not in 103, the
    # abstract the decision cites, so the support check drops that candidate.
    assert answer["exact"] == ["ENaC"] and answer["support"]["dropped"] == ["CFTR"]
    assert answer["ideal"].startswith("ENaC. ENaC hyperactivity dehydrates")
    # A share of 0.6, and the abstract cited holds "ENaC": citations 1.0; no model other than
    # the answering one judged it (the local demo model is not verified): capped at 0.5.
    assert answer["confidence_parts"]["evidence"] == 0.6 and answer["cited"] == ["103"]
    assert answer["confidence"] == 0.5 and answer["confidence_parts"]["capped"] is True
    assert answer["source"] == "decision" and answer["rationale"] == DECIDED["why"]
    assert update["attempts"] == [{"round": 0, "temperature": 0.0, "answer": answer, "error": None}]
    shown = trace_text("synthesize", update)[0]
    # Phase B's passages had no verdict yet: synthesize judged them, and the trace says so.
    assert shown[0].startswith("relevance: 2 of 3 passages address the question")
    assert any(
        line.startswith("attempt in round 0 the decision is final (synthesis.mode vote")
        for line in shown
    )


@pytest.mark.parametrize(
    ("qtype", "decided", "exact", "lead"),
    [
        ("yesno", decision(("no", 3.0, ["101"]), ("yes", 2.0, [])), ["no"], "No. "),
        # No sentence holds both items: the answer is stated without a borrowed sentence.
        (
            "list",
            decision((["ENaC", "CFTR"], 0.8, ["101", "103"])),
            ["ENaC", "CFTR"],
            "The ensemble's readers answered ENaC; CFTR; no abstract",
        ),
        (
            "summary",
            decision(("CFTR mutations cause cystic fibrosis.", 1.0, ["101"])),
            [],
            "CFTR mutations cause cystic fibrosis.",
        ),
    ],
)
async def test_vote_mode_by_question_type(
    make_context, settings, index, qtype, decided, exact, lead
):
    # The rule step writes prose: the answer, then the sentence of the abstract behind it
    # (101 here), never a bare "no" (infra/bioasq/contract.py).
    ctx = make_context(script(), settings_=with_mode(settings, "vote"))
    update = await synthesize(state_for(index, qtype, decided), Runtime(context=ctx))
    answer = update["answer"]
    assert answer["exact"] == exact and answer["ideal"].startswith(lead)
    if qtype == "yesno":
        doc = PASSAGES[0]
        assert answer["ideal"][len(lead) :] in f"{doc['title']} {doc['abstract']}"


async def test_vote_mode_confidence_is_the_support_share_of_the_cited_evidence(
    make_context, settings, index
):
    decided = decision(("ENaC", 3.0, ["103"]), ("CFTR", 1.0, []))
    del decided["share"]  # organize's aggregate may not give one
    ctx = make_context(script(), settings_=with_mode(settings, "vote"))
    update = await synthesize(state_for(index, decided=decided), Runtime(context=ctx))
    # The share is 3 of 4, and the abstract cited holds the answer (capped: not verified).
    assert update["answer"]["confidence_parts"]["evidence"] == 0.75
    assert update["answer"]["confidence_parts"]["agreement"] == 0.75
    assert update["answer"]["confidence"] == 0.5


async def test_a_decision_nothing_shown_carries_is_never_given(make_context, settings, index):
    # Nobody cited an abstract, and no abstract shown carries the answer: it is refused
    # (confidence 0), where it used to be given at the evidence's floor.
    decided = decision(("dystrophin", 3.0, []), ("titin", 1.0, []))
    ctx = make_context(script(), settings_=with_mode(settings, "vote"))
    update = await synthesize(state_for(index, decided=decided), Runtime(context=ctx))
    answer = update["answer"]
    assert answer["source"] == "insufficient" and answer["confidence"] == 0.0
    assert answer["exact"] == [] and "'dystrophin'" in answer["insufficient"]
    assert answer["support"]["verdict"] == "refused"


async def test_a_failed_synthesis_is_tried_again_then_the_decision_stands_in(make_context, index):
    model = script(synthesize="not json at all")
    update = await synthesize(state_for(index), Runtime(context=make_context(model)))
    first = update["answer"]
    assert first["source"] == "synthesis" and first["failed"] == update["attempts"][0]["error"]
    assert first["confidence"] == first["model_confidence"] == 0.0  # the gate asks again
    state = state_for(index) | {"attempts": update["attempts"]}
    update = await synthesize(state, Runtime(context=make_context(model)))
    answer = update["answer"]
    # The decision cites 103, which carries ENaC and not CFTR: the stand-in keeps ENaC.
    assert answer["source"] == "vote" and answer["exact"] == ["ENaC"]
    assert answer["ideal"].startswith("ENaC. ENaC hyperactivity dehydrates")
    assert answer["cited"] == ["103"]
    assert update["attempts"][0]["temperature"] == 0.0
    assert "synthesize: the vote answer stands in" in update["notes"]
    # The trace says whose the support verdict is: the refused reply's error is not "error:"
    # beside the stand-in's "support: supported".
    shown = trace_text("synthesize", update)[0]
    assert f"  synthesis failed: {update['attempts'][0]['error']}" in shown
    said = shown.index(STAND_IN_LINE)
    assert said < next(i for i, line in enumerate(shown) if line.startswith("  support: "))
    assert not any(line.startswith("  error: ") for line in shown)


@pytest.mark.parametrize(
    ("ideal", "exact", "broken"),
    [
        ('"][{"', ["ENaC"], "not a sentence"),
        ("} {{", ["ENaC"], "not a sentence"),
        ("It is the ENaC channel.", [], "exact answer is empty"),
    ],
)
async def test_junk_from_the_synthesizer_is_a_failed_attempt_never_an_answer(
    make_context, index, ideal, exact, broken
):
    reply = synthesis_reply(exact, confidence=0.0) | {"ideal_answer": ideal}
    model = script(synthesize=reply)
    update = await synthesize(state_for(index), Runtime(context=make_context(model)))
    assert broken in update["attempts"][0]["error"] and update["answer"]["failed"]
    state = state_for(index) | {"attempts": update["attempts"]}
    update = await synthesize(state, Runtime(context=make_context(model)))
    assert update["answer"]["source"] == "vote" and update["answer"]["exact"] == ["ENaC"]


async def test_junk_with_no_decision_behind_it_says_the_evidence_is_insufficient(
    make_context, index
):
    reply = synthesis_reply([], confidence=1.0) | {"ideal_answer": "][{"}
    model = script(synthesize=reply)
    state = state_for(index, decided=decision()) | {
        "attempts": [{"round": 0, "temperature": 0.1, "answer": {}, "error": "earlier"}]
    }
    update = await synthesize(state, Runtime(context=make_context(model)))
    answer = update["answer"]
    assert answer["source"] == "insufficient" and answer["confidence"] == 0.0
    assert answer["ideal"].startswith("Insufficient evidence: the ensemble reached no answer")
    assert "synthesis failed: the answer broke the contract" in answer["insufficient"]


async def test_a_yes_no_answer_that_contradicts_itself_is_not_an_answer(make_context, index):
    yes_no = decision(("yes", 4.0, ["101"]), ("no", 1.0, []), share=0.8)
    reply = {"exact_answer": "no", "ideal_answer": "Yes, they clearly do so.", "confidence": 0.9}
    model = script(synthesize=reply | {"cited_pmids": ["101"]})
    update = await synthesize(
        state_for(index, "yesno", yes_no), Runtime(context=make_context(model))
    )
    assert "says 'yes' where the exact answer says 'no'" in update["attempts"][0]["error"]


async def test_without_a_decision_synthesis_reads_the_top_contexts(make_context, index):
    model = script(synthesize=synthesis_reply(["CFTR"], cited=()))
    state = state_for(index, decided=None)
    del state["decision"]
    update = await synthesize(state, Runtime(context=make_context(model)))
    prompt = model.calls[0]["messages"][-1].content
    assert "The ensemble reached no decision" in prompt and "Ensemble decision" not in prompt
    assert pmids_in(model.calls[0]["messages"]) == ["101", "102", "103"]
    assert "overrode_decision" not in update["answer"]


def test_trace_shows_the_decision_its_order_and_settings():
    lines = trace_text("ensemble", {"members": [], "votes": MAJORITY, "decision": DECIDED})[0]
    assert "decision (ccv, by ensemble): CCV: 2 valid citations of 103" in lines
    at = lines.index("answers:")
    assert lines[at + 1 : at + 4] == [
        "  #  answer  support  cites",
        "  1  ENaC          2  103",
        "  2  CFTR          1  101, 102",
    ]
    assert "evidence order: 103 101" in lines
    assert "settings: members=20, evidence=relaxed" in lines
