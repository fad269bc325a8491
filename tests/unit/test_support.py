"""The support check (infra/support.py, issue 47): an answer stands on what its citations say.

Each case that the check refuses has its control beside it, which the same call accepts: the
test fails if the check refuses everything or nothing.
"""

import pytest
from langgraph.runtime import Runtime

from graphs.describe import trace_text
from infra.bioasq.contract import answer_problem, degenerate_item, degenerate_prose
from infra.support import check_support, definitions, terms
from nodes.synthesize import synthesize
from tests.support.fakes import script

LOSARTAN = {
    "pmid": "1",
    "title": "Losartan in Alzheimer's disease (RADAR)",
    "abstract": "Losartan was not effective in reducing the rate of brain atrophy over 12 months. "
    "Blood pressure fell in the losartan group.",
}
CF = {
    "pmid": "2",
    "title": "Cystic fibrosis genetics",
    "abstract": "Cystic fibrosis is caused by mutations in the cystic fibrosis transmembrane "
    "conductance regulator (CFTR). The ENaC channels are hyperactive in airway cells.",
}
TNF = {
    "pmid": "3",
    "title": "",
    "abstract": "Serum TNF-α and IL-6 levels rose after the infusion of mTOR inhibitors.",
}


ON = {"relevant": True, "terms": 1.0, "cosine": 1.0, "cross_encoder": None, "missing": []}


def verdict(qtype, exact, cited, ideal="", question="What do these abstracts report?"):
    # Every cited passage judged on the question: these tests hold the rest of the check.
    relevance = {p["pmid"]: ON for p in cited}
    return check_support(qtype, exact, ideal, cited, question=question, relevance=relevance)


@pytest.mark.parametrize(
    ("entity", "passage"),
    [
        ("cftr", CF),  # case
        ("IL6", TNF),  # hyphen and space inside a name
        ("TNF-alpha", TNF),  # a Greek letter by its name
        ("TNFα", TNF),
        ("ENaC channel", CF),  # a plural
        ("CFTR", CF),
        ("Cystic fibrosis transmembrane conductance regulator", CF),
        ("the mTOR inhibitors infusion", TNF),  # content words within one sentence
    ],
)
def test_an_entity_is_carried_when_the_cited_passage_holds_it_normalised(entity, passage):
    found = verdict("factoid", [entity], [passage])
    assert found.verdict == "supported", found.reason
    assert found.carriers[entity].pmid == passage["pmid"]
    # Control: the same entity against a passage that does not hold it is refused.
    assert verdict("factoid", [entity], [LOSARTAN]).verdict == "refused"


def test_an_abbreviation_stands_for_the_expansion_its_passage_defines():
    assert definitions(CF["abstract"])[0][1] == terms("CFTR")
    text = {
        "pmid": "9",
        "title": "",
        "abstract": "The CFTR protein is a chloride channel. "
        "It is the cystic fibrosis transmembrane conductance regulator (CFTR).",
    }
    expansion = "cystic fibrosis transmembrane conductance regulator"
    found = verdict("factoid", [expansion], [text])
    assert found.verdict == "supported"
    no_definition = {**text, "abstract": "The CFTR protein is a chloride channel."}
    assert verdict("factoid", [expansion], [no_definition]).verdict == "refused"


def test_a_fixed_answer_that_its_citation_does_not_hold_is_refused():
    # The fixed server's "CFTR" cited for a losartan question.
    found = verdict("factoid", ["CFTR"], [LOSARTAN])
    assert found.verdict == "refused" and "'CFTR'" in found.reason
    assert verdict("factoid", ["losartan"], [LOSARTAN]).verdict == "supported"


def test_a_list_keeps_only_the_items_its_citations_carry_and_is_refused_when_none_are():
    found = verdict("list", ["CFTR", "ENaC", "dystrophin"], [CF])
    assert found.verdict == "supported" and found.kept == ["CFTR", "ENaC"]
    assert found.dropped == ["dystrophin"]
    assert verdict("list", ["dystrophin", "titin"], [CF]).verdict == "refused"


def test_an_answer_with_no_retrieved_evidence_is_never_given():
    # A question in German retrieved nothing: whatever the model says, nothing carries it.
    for qtype, exact in (("factoid", ["CFTR"]), ("yesno", ["yes"]), ("summary", [])):
        found = verdict(qtype, exact, [], ideal="CFTR is mutated, as the cited study reports.")
        assert found.verdict == "refused" and found.reason.startswith("evidence:")
    assert verdict("factoid", ["CFTR"], [CF]).verdict == "supported"


LOSARTAN_Q = "Is losartan effective against brain atrophy in Alzheimer's disease?"


def test_prose_must_share_its_words_with_the_passages_it_cites():
    off_topic = "CFTR is the answer to this question, as the cited study reports."
    found = verdict("yesno", ["yes"], [LOSARTAN], ideal=off_topic, question=LOSARTAN_Q)
    assert found.verdict == "refused" and found.reason.startswith("grounded:")
    on_topic = "No. Losartan did not reduce brain atrophy over 12 months."
    found = verdict("yesno", ["no"], [LOSARTAN], ideal=on_topic, question=LOSARTAN_Q)
    assert found.verdict == "supported"


@pytest.mark.parametrize(
    "text",
    [
        "a protein ty3, a protein ty3, a protein ty3, a protein ty3, a protein ty3, a protein",
        "} The answer is: [1] the CFTR gene is mutated in cystic fibrosis.",
        '{"answer": "CFTR is mutated in cystic fibrosis patients"} and more text here',
        "CFTR is mutated <b>in</b> cystic fibrosis.",
    ],
)
def test_degenerate_prose_is_refused_by_the_contract(text):
    assert degenerate_prose(text)
    assert answer_problem("summary", None, text)


def test_prose_that_restates_itself_as_gold_does_is_not_a_loop():
    # The golden files' most repetitive ideal answer (0.48 of its 3-grams) is prose.
    gold = (
        "Neoplastic leptomeningeal disease (LMD) represents infiltration of the leptomeninges "
        "by tumor cells. LMD represents infiltration of the leptomeninges by tumor cells."
    )
    assert degenerate_prose(gold) is None
    assert degenerate_prose("Mitochondria are involved [7] in lace plant cell death.") is None


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ("/12.12.2022/12.12.2022/12.12.2022/", "dates or numbers"),
        ("2019-01-01", "dates or numbers"),
        ("cystic fibrosis transmembrane conductance regulator of", "cut mid-phrase"),
        ("beta-", "cut mid-phrase"),
        ("interleukin (", "cut mid-phrase"),
    ],
)
def test_debris_entities_are_refused(item, why):
    assert why in degenerate_item(item)


@pytest.mark.parametrize(
    "item",
    [
        "1:3500-1:5000",
        "14-3-3",
        "vitamin A",
        "1.1%",
        "TNF-α",
        "2017",
        "Lipid Mini-On",
        "http://a.org/",
    ],
)
def test_gold_entities_are_not_debris(item):
    assert degenerate_item(item) is None


def test_an_entity_as_long_as_the_schema_allows_was_cut():
    cut = "x" * 79 + "y"
    assert "cut at the schema's 80" in degenerate_item(cut, bound=80)
    assert degenerate_item(cut) is None


def test_the_validator_refuses_a_submission_holding_a_debris_item():
    from infra.bioasq.validate import validate_submission

    entry = {
        "id": "q1",
        "body": "Which genes?",
        "type": "list",
        "documents": [],
        "snippets": [],
        "exact_answer": [["CFTR"], ["/12.12.2022/12.12.2022/"]],
        "ideal_answer": "CFTR is one of them.",
    }
    problems = validate_submission({"questions": [entry]}, phase="B")
    assert any("dates or numbers" in p.message for p in problems)
    entry["exact_answer"] = [["CFTR"], ["ENaC"]]
    assert not validate_submission({"questions": [entry]}, phase="B")


async def test_synthesis_of_an_answer_its_citation_contradicts_in_words_is_refused(
    make_context, index
):
    # The fixed server: "CFTR" cited from the losartan abstract. Refused, then the decision
    # (which cites nothing) is refused too: the answer says the evidence is insufficient.
    reply = {
        "exact_answer": ["CFTR"],
        "ideal_answer": "CFTR, as the cited study reports.",
        "confidence": 0.9,
        "cited_pmids": ["1"],
    }
    state = {
        "question": "Which drug was tested against brain atrophy in Alzheimer's disease?",
        "qtype": "factoid",
        "organized": [{**LOSARTAN, "score": 1.0}],
        "decision": {
            "strategy": "permute_vote",
            "answers": [{"answer": "CFTR", "support": 3.0, "cited": []}],
            "order": ["1"],
            "why": "3 of 3",
            "settings": {},
            "source": "ensemble",
        },
        "attempts": [{"round": 0, "temperature": 0.1, "answer": {}, "error": "earlier"}],
    }
    update = await synthesize(state, Runtime(context=make_context(script(synthesize=reply))))
    answer = update["answer"]
    assert "not supported by its evidence" in update["attempts"][0]["error"]
    assert answer["source"] == "insufficient" and answer["confidence"] == 0.0
    assert answer["exact"] == [] and answer["ideal"].startswith("Insufficient evidence:")
    shown = "\n".join(trace_text("synthesize", update)[0])  # trace show, the page, the export
    assert "carried: 0 of 1 carried" in shown  # the attempt's error
    assert "support: refused" in shown and "carried FAILED: 0 of 1 carried" in shown
    # Control: the same reply naming what the abstract says is given.
    good = reply | {"exact_answer": ["losartan"], "ideal_answer": "Losartan was tested."}
    state["question"] += " (the control)"  # another prompt: the reply cache holds the first
    update = await synthesize(state, Runtime(context=make_context(script(synthesize=good))))
    assert update["answer"]["source"] == "synthesis", update["attempts"][0]["error"]
    assert update["answer"]["exact"] == ["losartan"]
    shown = "\n".join(trace_text("synthesize", update)[0])
    assert "'losartan' in 1 (verbatim): Losartan in Alzheimer's disease" in shown
    assert "verified: not verified" in shown  # the scripted local model: verify.enabled auto


def test_a_yes_whose_own_prose_negates_the_question_contradicts_itself():
    # The demo model's "Yes. INTERPRETATION: … was not effective …" (issue 47).
    question = "Is losartan effective against brain atrophy in Alzheimer's disease?"
    prose = "Yes. INTERPRETATION: Losartan was not effective in reducing the rate of brain atrophy."
    assert "'not effective" in answer_problem("yesno", "yes", prose, question=question)
    # Controls: the same prose under "no" (after its first word), a 'yes' that negates other
    # words, and the check without the question, are not contradictions.
    assert answer_problem("yesno", "no", prose.removeprefix("Yes. "), question=question) is None
    other = "Yes. Losartan reduced atrophy; blood pressure did not fall further."
    assert answer_problem("yesno", "yes", other, question=question) is None
    assert answer_problem("yesno", "yes", prose) is None


async def test_an_uncited_answer_is_verified_against_what_it_was_made_from(make_context, settings):
    # The rule step's yes/no stand-in cites nothing when the members cited nothing: the
    # verifier reads the passages it was made from, and the answer cites the one it quotes.
    from nodes.synthesize.support import held_to_evidence, relevance_for

    chosen = settings.model_copy(
        update={
            "verify": settings.verify.model_copy(update={"enabled": "on"}),
            "models": settings.models.model_copy(update={"cache": "off"}),
        }
    )
    quote = "Losartan was not effective in reducing the rate of brain atrophy over 12 months."
    said = {"verdicts": [{"pmid": "1", "quote": quote, "verdict": "supports"}]}
    ctx = make_context(script(verify=said), settings_=chosen)
    answer = {
        "exact": ["no"],
        "ideal": "No. Losartan was not effective in reducing brain atrophy.",
        "confidence": 0.0,
        "cited": [],
    }
    contexts = [{**LOSARTAN, "score": 1.0}, {**CF, "score": 0.5}]
    question = "Is losartan effective against brain atrophy?"
    judged = relevance_for(ctx, question, contexts, None)
    assert judged["1"]["relevant"] and not judged["2"]["relevant"]
    checked, refused, calls = await held_to_evidence(
        ctx, question, "yesno", answer, contexts, judged
    )
    assert refused is None and checked["cited"] == ["1"] and len(calls) == 1
    assert checked["support"]["verified"]["status"] == "supported"
    # Control: the verifier quoting nothing verbatim supports nothing, and the answer is refused.
    said = {"verdicts": [{"pmid": "1", "quote": "Losartan works.", "verdict": "supports"}]}
    ctx = make_context(script(verify=said), settings_=chosen)
    checked, refused, _ = await held_to_evidence(ctx, question, "yesno", answer, contexts, judged)
    assert refused is not None and "verifier" in refused and checked["cited"] == []
