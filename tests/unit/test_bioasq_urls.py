"""Every PubMed URL form BioASQ files use is read; one form is written."""

import json
from pathlib import Path

import pytest

from infra.bioasq.formats import load_questions
from infra.bioasq.measures import evaluate_phase_a
from infra.bioasq.urls import canonical_url, pmid_of, pubmed_url, written_form_problem
from infra.bioasq.validate import validate_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bioasq_eval"
GOLD = FIXTURES / "phase_a_gold.json"
MIXED = FIXTURES / "phase_a_gold_mixed_urls.json"


@pytest.mark.parametrize(
    "value",
    [
        "34210752",
        " 34210752 ",
        "http://www.ncbi.nlm.nih.gov/pubmed/34210752",
        "https://www.ncbi.nlm.nih.gov/pubmed/34210752",
        "https://www.ncbi.nlm.nih.gov/pubmed/34210752/",
        "http://ncbi.nlm.nih.gov/pubmed/34210752",
        "https://pubmed.ncbi.nlm.nih.gov/34210752/",
        "https://pubmed.ncbi.nlm.nih.gov/34210752",
        "http://pubmed.ncbi.nlm.nih.gov/34210752/",
        "HTTPS://PUBMED.NCBI.NLM.NIH.GOV/34210752/",
    ],
)
def test_every_pubmed_form_gives_its_pmid(value):
    assert pmid_of(value) == "34210752"
    if not value.strip().isdigit():
        assert canonical_url(value) == "http://www.ncbi.nlm.nih.gov/pubmed/34210752"


def test_no_pmid_is_an_error_and_other_strings_stay_as_they_are():
    with pytest.raises(ValueError, match="no PMID"):
        pmid_of("https://pubmed.ncbi.nlm.nih.gov/")
    assert canonical_url("doc-1") == "doc-1"
    assert pubmed_url("1") == "http://www.ncbi.nlm.nih.gov/pubmed/1"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("http://www.ncbi.nlm.nih.gov/pubmed/34210752", None),
        ("34210752", "bare PMID '34210752'"),
        ("https://pubmed.ncbi.nlm.nih.gov/34210752/", "PubMed's current URL form"),
        ("https://www.ncbi.nlm.nih.gov/pubmed/34210752", "uses https"),
        ("http://www.ncbi.nlm.nih.gov/pubmed/34210752/", "has a trailing '/'"),
        ("http://ncbi.nlm.nih.gov/pubmed/34210752", "is not exactly"),
        ("doc-1", "is not a PubMed URL of the form 'http://www.ncbi.nlm.nih.gov/pubmed/<PMID>'"),
    ],
)
def test_a_form_other_than_the_written_one_is_named_with_the_fix(value, problem):
    said = written_form_problem(value)
    if problem is None:
        assert said is None
    else:
        assert problem in said
        if value != "doc-1":
            assert said.endswith("'http://www.ncbi.nlm.nih.gov/pubmed/34210752'")


def test_the_mixed_fixture_really_mixes_forms_in_documents_and_snippets():
    data = json.loads(MIXED.read_text())
    docs = {d.split("/")[2] for q in data["questions"] for d in q["documents"]}
    snippet_docs = {
        s["document"].split("/")[2] for q in data["questions"] for s in q.get("snippets", [])
    }
    assert docs == snippet_docs == {"pubmed.ncbi.nlm.nih.gov", "www.ncbi.nlm.nih.gov"}


def test_a_file_mixing_forms_loads_as_the_same_questions():
    assert [q.documents for q in load_questions(MIXED)] == [
        q.documents for q in load_questions(GOLD)
    ]


def test_a_golden_file_mixing_forms_scores_as_its_one_form_copy():
    submission = json.loads((FIXTURES / "phase_a_submission.json").read_text())
    mixed = evaluate_phase_a(json.loads(MIXED.read_text()), submission)
    plain = evaluate_phase_a(json.loads(GOLD.read_text()), submission)
    assert mixed == plain
    assert plain["documents_map"] > 0 and plain["snippets_f1"] > 0


def test_the_validator_takes_a_golden_file_in_any_form():
    assert validate_file(MIXED) == validate_file(GOLD)
