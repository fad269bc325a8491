"""The answer as ask, chat, the page and the export show it: one vocabulary, cited evidence apart."""

import json
from pathlib import Path

from graphs.cli.ask import ANSWER_KEYS, answer_json
from graphs.describe import answer_lines
from nodes.answer_view import cited_evidence, exact_text, retrieved_documents
from nodes.describing import confidence_text
from nodes.trace_view import Cited

ANSWERS = Path(__file__).resolve().parents[1] / "fixtures" / "answers"
CITED = json.loads((ANSWERS / "cited.json").read_text())
INSUFFICIENT = json.loads((ANSWERS / "insufficient.json").read_text())


def test_the_cited_evidence_comes_with_sentences_apart_from_the_retrieved_documents():
    assert answer_lines(CITED) == [
        "Exact answer (yesno): yes",
        "Ideal answer: Yes. Thrombocytopenia followed rivoparin in 3% of treated patients [203].",
        "Confidence: 0.40 from the evidence (model said 0.95)",
        "Cited evidence:",
        "  [203] Thrombocytopenia after rivoparin: a cohort study",
        '      "Thrombocytopenia followed rivoparin in 3% of treated patients."',
        "  [205] Platelet counts under low-molecular-weight heparins",
        '      "Platelet counts fell below 100,000 in 11 of 360 patients given rivoparin."',
        "Retrieved documents (retrieval order):",
        "  1. [201] Rivoparin and heparin-induced thrombocytopenia: a review",
        "  2. [202] Morvan-Kessler syndrome in two siblings",
        "  3. [203] Thrombocytopenia after rivoparin: a cohort study (cited)",
        "  4. [204] Morvan-Kessler syndrome: case report",
        "  5. [205] Platelet counts under low-molecular-weight heparins (cited)",
        "  6. [206] Anticoagulants in pregnancy",
    ]


def test_retrieved_documents_keep_retrieval_order_and_a_limit_says_how_many_more():
    assert [d.pmid for d in retrieved_documents(CITED)] == CITED["documents"]
    lines = answer_lines(CITED, documents=2)
    assert lines[-3:] == [
        "  1. [201] Rivoparin and heparin-induced thrombocytopenia: a review",
        "  2. [202] Morvan-Kessler syndrome in two siblings",
        "  … 4 more",
    ]


def test_an_insufficient_result_says_so_and_cites_nothing():
    lines = answer_lines(INSUFFICIENT)
    assert lines[:3] == [
        "Ideal answer (factoid): Insufficient evidence: no ensemble member could answer this "
        "question from the evidence found.",
        "Confidence: 0.00",
        "Cited evidence: none: the answer cites no passage",
    ]
    assert "Retrieved documents (retrieval order):" in lines


def test_a_result_from_before_cited_evidence_shows_no_evidence_section():
    older = {k: CITED[k] for k in ("type", "exact_answer", "ideal_answer", "documents", "titles")}
    older["confidence"] = 0.9
    lines = answer_lines(older)
    assert "Confidence: 0.90" in lines and not any("Cited evidence" in x for x in lines)
    assert cited_evidence(older) == [] and confidence_text(older) == "0.90"


def test_a_summary_has_no_exact_answer_line_and_names_its_type():
    summary = {**CITED, "type": "summary", "exact_answer": None}
    assert answer_lines(summary)[0].startswith("Ideal answer (summary): Yes.")
    assert exact_text(None) is None
    assert exact_text([["TNF", "tumour necrosis factor"], ["IL-6"]]) == "TNF; IL-6"


def test_evidence_titles_fall_back_to_the_titles_map():
    result = {**CITED, "evidence": [{"pmid": "201", "sentence": "A review."}, {"title": "no pmid"}]}
    assert cited_evidence(result) == [
        Cited(
            pmid="201",
            title="Rivoparin and heparin-induced thrombocytopenia: a review",
            sentence="A review.",
            relevance="",
        )
    ]


def test_ask_json_always_says_whether_the_answer_is_insufficient():
    for result, insufficient in ((CITED, False), (INSUFFICIENT, True)):
        shown = answer_json(result)
        assert list(shown) == list(ANSWER_KEYS) and shown["insufficient"] is insufficient
        assert shown["evidence"] == result["evidence"]
        assert shown["model_confidence"] == result["model_confidence"]
    older = {k: v for k, v in CITED.items() if k not in ("insufficient", "evidence")}
    shown = answer_json(older)
    assert shown["insufficient"] is False and shown["evidence"] == []
    assert shown["documents"] == CITED["documents"]  # retrieval order, as the graph gave it


def test_an_answer_says_whether_it_was_verified():
    from graphs.describe import answer_lines

    result = {
        "type": "yesno",
        "exact_answer": "yes",
        "ideal_answer": "Yes, mitochondria act early.",
        "confidence": 0.6,
        "support": {
            "verdict": "supported",
            "verified": "not verified",
            "why": "verify.enabled is off for this model",
        },
    }
    assert (
        "Support: carried by the cited passages; not verified (verify.enabled is off for this "
        "model)"
    ) in answer_lines(result)
    uncited = answer_lines(result | {"evidence": []})
    assert any("carried by the passages it was made from (it cites none)" in x for x in uncited)
    refused = result | {"support": {"verdict": "refused", "verified": "refused", "why": "x"}}
    assert not any(line.startswith("Support:") for line in answer_lines(refused))


def test_an_answer_its_author_alone_judged_says_so():
    from graphs.describe import answer_lines

    result = {
        "type": "yesno",
        "exact_answer": "no",
        "ideal_answer": "No, aspirin did not help.",
        "confidence": 0.5,
        "support": {
            "verdict": "supported",
            "verified": "self-verified",
            "judge": "self",
            "why": "PMID 7 supports it",
        },
    }
    assert (
        "Support: carried by the cited passages; self-verified: judged only by the model that "
        "wrote the answer (PMID 7 supports it)"
    ) in answer_lines(result)


def judged(relevant, terms=0.8, cosine=0.6):
    return {"relevant": relevant, "terms": terms, "cosine": cosine, "cross_encoder": None}


def test_each_passage_says_whether_it_addresses_the_question():
    # ask, chat, the page and the export read the relevance verdicts finalize keeps.
    result = {
        **CITED,
        "support": {"verdict": "supported", "verified": "not verified", "why": ""},
        "relevance": {
            "203": judged(True),
            "205": judged(True, 0.5, 0.41),
            "202": judged(False, 0.0, 0.05),
        },
    }
    lines = answer_lines(result)
    at = lines.index("Cited evidence:")
    assert lines[at + 1 : at + 3] == [
        "  [203] Thrombocytopenia after rivoparin: a cohort study",
        "      on the question (80% of its key terms, cosine 0.60)",
    ]
    assert "  2. [202] Morvan-Kessler syndrome in two siblings (off the question)" in lines
    assert "  1. [201] Rivoparin and heparin-induced thrombocytopenia: a review" in lines
    assert any(line.startswith("Support: carried by the cited passages") for line in lines)
    assert [d.relevance[:3] for d in retrieved_documents(result)][:2] == ["", "off"]


def test_support_is_never_claimed_beside_a_passage_off_the_question():
    # The README's question with the demo model: "No", citing an abstract on mesial temporal
    # sclerosis, read "Support: carried by the cited passages" (issue 55).
    result = {
        **CITED,
        "support": {"verdict": "supported", "verified": "not verified", "why": ""},
        "relevance": {"203": judged(True), "205": judged(False, 0.05, 0.1)},
    }
    shown = "\n".join(answer_lines(result))
    assert "carried by the cited passages" not in shown
    assert "Support: not carried: PMID 205 cited beside it is off the question" in shown
    result["relevance"]["205"] = judged(True)
    assert "carried by the cited passages" in "\n".join(answer_lines(result))


def test_the_export_and_the_page_show_each_passage_s_relevance():
    from graphs.traces.blocks_html import blocks_html
    from nodes.answer_view import answer_view

    result = {
        **CITED,
        "relevance": {"203": judged(True), "205": judged(True), "202": judged(False, 0.0, 0.05)},
    }
    html = blocks_html([answer_view(result)])
    assert "on the question (80% of its key terms, cosine 0.60)" in html
    assert "off the question (0% of its key terms, cosine 0.05)" in html  # 202, retrieved
    rows = cited_evidence(result)  # what the page's server sends, each row as JSON
    assert rows[0].relevance.startswith("on the question")
