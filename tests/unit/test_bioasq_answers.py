"""BioASQ question types, answer normalisation and exact_answer shapes."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from infra.bioasq import (
    QUESTION_TYPES,
    QuestionType,
    detect_type,
    exact_answer_shape,
    normalize_answer,
    pubmed_url,
)

# --- detect_type ------------------------------------------------------------------------------


def test_question_types_are_the_four_bioasq_types():
    assert QUESTION_TYPES == ("yesno", "factoid", "list", "summary")
    assert json.dumps({QuestionType.LIST: list(QUESTION_TYPES)}) == (
        '{"list": ["yesno", "factoid", "list", "summary"]}'
    )
    assert "yesno" in QUESTION_TYPES and ", ".join(QUESTION_TYPES).startswith("yesno, factoid")


def test_a_detected_type_is_a_plain_string_as_the_state_holds_it():
    detected = detect_type("Is aspirin safe in pregnancy?")
    assert type(detected) is str and detected == QuestionType.YESNO


def spelled_types(source: str) -> int:
    """Return how many tuple, list or set literals in the code spell all four question types."""
    wanted = set(QuestionType)
    return sum(
        isinstance(node, ast.Tuple | ast.List | ast.Set)
        and {e.value for e in node.elts if isinstance(e, ast.Constant)} == wanted
        for node in ast.walk(ast.parse(source))
    )


def test_the_question_types_are_spelled_once_in_the_product():
    root = Path(__file__).resolve().parents[2]
    spelled = [
        path.relative_to(root).as_posix()
        for top in ("graphs", "nodes", "infra", "prompts")
        for path in sorted((root / top).rglob("*.py"))
        if spelled_types(path.read_text(encoding="utf-8"))
    ]
    assert spelled == []  # the enum's members are named, never listed as strings


def test_the_scan_sees_the_types_listed_again():
    """The negative control: the list each of four modules once kept is found; a pair is not."""
    assert spelled_types('TYPES = ("yesno", "factoid", "list", "summary")') == 1
    assert spelled_types('for t in ["summary", "list", "factoid", "yesno"]: pass') == 1
    assert spelled_types('CITED = ("yesno", "factoid")') == 0


@pytest.mark.parametrize(
    "question",
    [
        "Is aspirin effective for preventing colorectal cancer?",
        "Are there any approved drugs for Duchenne muscular dystrophy?",
        "Does metformin reduce the risk of pancreatic cancer?",
        "Can CRISPR-Cas9 be used to treat sickle cell disease?",
        "Was golimumab tested for diabetes?",
        "Has Denosumab been approved by the FDA?",
        "Should patients with atrial fibrillation receive anticoagulants?",
    ],
)
def test_auxiliary_verb_questions_are_yesno(question):
    assert detect_type(question) == "yesno"


@pytest.mark.parametrize(
    "question",
    [
        "Which gene is mutated in cystic fibrosis?",
        "What is the most common cause of community-acquired pneumonia?",
        "Which enzyme is deficient in phenylketonuria?",
        "What is the mode of inheritance of Huntington disease?",
        "Where in the cell does the Golgi apparatus sort proteins?",
        "Who discovered penicillin?",
        "When was the first CRISPR clinical trial started?",
    ],
)
def test_wh_questions_about_one_thing_are_factoid(question):
    assert detect_type(question) == "factoid"


@pytest.mark.parametrize(
    "question",
    [
        "List the drugs used for the treatment of multiple sclerosis.",
        "Enumerate the side effects of statins.",
        "Name all the subunits of the proteasome.",
        "Which are the main symptoms of Parkinson disease?",
        "Which drugs are used for migraine prophylaxis?",
        "What are the known mutations of the BRCA1 gene?",
        "What are the different types of diabetes?",
        "What are the main causes of anemia?",
    ],
)
def test_enumeration_questions_are_list(question):
    assert detect_type(question) == "list"


@pytest.mark.parametrize(
    "question",
    [
        "Describe the mechanism of action of metformin.",
        "What is the role of p53 in apoptosis?",
        "How does insulin regulate glucose uptake in muscle?",
        "Why do statins cause myopathy?",
        "What is known about the gut microbiome in autism?",
        "Explain the function of telomerase in cancer cells.",
        "What are the effects of smoking on lung function?",
        "Summarize the current knowledge about long COVID.",
    ],
)
def test_explanation_questions_are_summary(question):
    assert detect_type(question) == "summary"


def test_detection_ignores_case_leading_spaces_and_quotes():
    assert detect_type('  "IS aspirin safe in pregnancy?"') == "yesno"
    assert detect_type("¿Is aspirin safe in pregnancy?") == "yesno"
    assert detect_type("list the genes of the HOX cluster") == "list"


def test_yesno_needs_a_whole_auxiliary_word():
    # "Isoniazid" starts with "Is" but is not the verb.
    assert detect_type("Isoniazid resistance is caused by which gene?") == "factoid"


def test_what_are_the_genes_is_list():
    assert detect_type("What are the genes involved in hereditary breast cancer?") == "list"


# --- normalize_answer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The CFTR gene", "cftr gene"),
        ("cftr gene", "cftr gene"),
        ("CFTR  Gene.", "cftr gene"),
        ("An apple", "apple"),
        ("   Many   spaces  ", "many spaces"),
        ("Yes.", "yes"),
        ("IL-6", "il-6"),
        ("α-synuclein", "α-synuclein"),
        ("(BRCA1)", "brca1"),
        ("tumour, necrosis; factor!", "tumour necrosis factor"),
    ],
)
def test_normalize_answer_drops_case_punctuation_articles_and_spaces(raw, normalized):
    assert normalize_answer(raw) == normalized


def test_normalize_answer_applies_unicode_nfkc():
    assert normalize_answer("ＣＦＴＲ") == "cftr"  # fullwidth letters
    assert normalize_answer("ﬁbrosis") == "fibrosis"  # the "fi" ligature
    assert normalize_answer("Straße") == normalize_answer("STRASSE")  # casefold


def test_normalize_answer_keeps_decimal_points_and_percent():
    assert normalize_answer("0.5") == "0.5"
    assert normalize_answer("50%") == "50%"
    assert normalize_answer("3.5 mg.") == "3.5 mg"
    assert normalize_answer("p < 0.05") == "p 0.05"


def test_normalize_answer_keeps_plus_and_hyphen():
    assert normalize_answer("CD4+ T-cells") == "cd4+ t-cells"


def test_normalize_answer_removes_articles_only_as_whole_words():
    assert normalize_answer("Theophylline") == "theophylline"
    assert normalize_answer("Anakinra") == "anakinra"


def test_normalize_answer_of_only_an_article_is_empty():
    assert normalize_answer("The") == ""
    assert normalize_answer("...") == ""


# --- exact_answer_shape -----------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["yes", "Yes.", "  YES", "Yes, it is effective", "yes!"])
def test_yesno_variants_of_yes(answer):
    assert exact_answer_shape("yesno", [answer]) == "yes"


@pytest.mark.parametrize("answer", ["no", "No.", "NO, it is not", "maybe", "unclear"])
def test_yesno_anything_else_is_no(answer):
    assert exact_answer_shape("yesno", [answer]) == "no"


def test_yesno_uses_the_first_non_blank_answer():
    assert exact_answer_shape("yesno", ["", "  ", "yes", "no"]) == "yes"
    assert exact_answer_shape("yesno", ["no", "yes"]) == "no"


def test_yesno_without_answers_is_no():
    assert exact_answer_shape("yesno", []) == "no"


def test_factoid_is_a_list_of_single_synonym_lists():
    assert exact_answer_shape("factoid", ["CFTR", "ENaC"]) == [["CFTR"], ["ENaC"]]


def test_factoid_dedupes_by_normalized_form_keeping_the_first_surface():
    shaped = exact_answer_shape("factoid", ["The CFTR gene", "cftr gene", "ENaC", "enac."])
    assert shaped == [["The CFTR gene"], ["ENaC"]]


def test_factoid_keeps_at_most_five_candidates_in_order():
    shaped = exact_answer_shape("factoid", ["a1", "b1", "c1", "A1", "d1", "e1", "f1", "g1"])
    assert shaped == [["a1"], ["b1"], ["c1"], ["d1"], ["e1"]]


def test_factoid_drops_blank_and_article_only_answers():
    assert exact_answer_shape("factoid", ["", "  ", "the", " CFTR "]) == [["CFTR"]]


def test_list_is_one_single_item_list_per_entity_without_a_cap():
    items = [f"gene{i}" for i in range(8)]
    assert exact_answer_shape("list", items) == [[item] for item in items]


def test_list_dedupes_and_strips():
    assert exact_answer_shape("list", ["x1", "X1", " y1 ", "z1"]) == [["x1"], ["y1"], ["z1"]]


def test_summary_has_no_exact_answer():
    assert exact_answer_shape("summary", ["Aspirin lowers risk."]) is None


def test_empty_factoid_and_list_are_empty_lists():
    assert exact_answer_shape("factoid", []) == []
    assert exact_answer_shape("list", []) == []


# --- pubmed_url -------------------------------------------------------------------------------


def test_pubmed_url_is_the_bioasq_document_form():
    assert pubmed_url("12345678") == "http://www.ncbi.nlm.nih.gov/pubmed/12345678"
