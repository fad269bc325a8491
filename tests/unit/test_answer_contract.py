"""The answer contract (infra/bioasq/contract.py): junk is never an answer, prose always is."""

from __future__ import annotations

import pytest

from infra.bioasq.contract import (
    SUBMISSION_MIN_WORDS,
    answer_problem,
    contradiction,
    insufficient_answer,
    is_insufficient,
)


@pytest.mark.parametrize(
    ("qtype", "exact", "ideal", "problem"),
    [
        ("factoid", [], '"][{"', "not a sentence"),
        ("list", [], "} {{", "not a sentence"),
        ("factoid", [["CFTR"]], "MOCKER-A", "not a sentence"),
        ("factoid", [["CFTR"]], "Milk", "not a sentence"),
        ("factoid", [["CFTR"]], '{"exact_answer": ["CFTR"]}', "JSON"),
        ("factoid", [["CFTR"]], '{"answer": "The gene CFTR is mutated in this disease"}', "JSON"),
        ("factoid", [["CFTR"]], "", "empty"),
        ("factoid", [], "Cystic fibrosis is caused by mutations in CFTR.", "exact answer is empty"),
        ("list", [["]["]], "Several genes are involved here.", "names nothing"),
        ("yesno", "no", "Yes, rivaroxaban can cause it.", "says 'yes' where"),
        ("yesno", "maybe", "It is not known whether it does.", "not 'yes' or 'no'"),
    ],
)
def test_junk_empty_and_contradictions_break_the_contract(qtype, exact, ideal, problem):
    found = answer_problem(qtype, exact, ideal)
    assert found is not None and problem in found, found


@pytest.mark.parametrize(
    ("qtype", "exact", "ideal"),
    [
        ("factoid", [["CFTR"]], "Cystic fibrosis is caused by mutations in CFTR."),
        ("list", [["TNF"], ["IL-6"]], "TNF and IL-6 are both raised in sepsis."),
        ("yesno", "yes", "Yes. Heparin-induced thrombocytopenia is well documented."),
        ("yesno", "no", "No, the trial found no effect on mortality."),
        ("summary", None, "Aspirin lowers the risk of colorectal adenoma in trials."),
        # An honest insufficient-evidence result is an answer: its empty exact answer stands.
        ("factoid", [], insufficient_answer("no member answered")),
    ],
)
def test_prose_that_answers_keeps_the_contract(qtype, exact, ideal):
    assert answer_problem(qtype, exact, ideal) is None


def test_submissions_are_held_to_words_not_to_sentences():
    # The golden files hold one-word ideal answers ("Yes.", "MTH1", "20"), so a submission
    # needs one word; debris has none.
    assert answer_problem("yesno", "yes", "Yes.", min_words=SUBMISSION_MIN_WORDS) is None
    assert answer_problem("factoid", [["20"]], "20", min_words=SUBMISSION_MIN_WORDS) is None
    assert answer_problem("factoid", [["x"]], "][{", min_words=SUBMISSION_MIN_WORDS)
    assert answer_problem("yesno", "yes", "Yes.") is not None  # quorum's own answers: a sentence


def test_the_insufficient_statement_is_recognised_and_a_contradiction_needs_a_leading_word():
    text = insufficient_answer("  no model could answer\n (last error: timeout).  ")
    assert text == "Insufficient evidence: no model could answer (last error: timeout)."
    assert is_insufficient(text) and not is_insufficient("Evidence is insufficient here.")
    assert contradiction("yesno", "yes", "Nothing suggests harm; yes, it is safe.") is None
    assert contradiction("yesno", "Yes", "no, it is not") is not None
