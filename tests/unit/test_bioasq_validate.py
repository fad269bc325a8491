"""BioASQ Task B submission validator: one fixture per mistake, golden excerpts, the phases."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from infra.bioasq.answers import exact_answer_shape
from infra.bioasq.contract import answer_problem, insufficient_answer
from infra.bioasq.formats import FormatError, load_questions
from infra.bioasq.urls import pubmed_url
from infra.bioasq.validate import Problem, errors, validate_file, validate_submission
from tests.support.data import GOLDEN, GOLDEN_SLIPS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bioasq_submissions"
REPEATS = FIXTURES.parent / "bioasq_golden" / "golden_repeats.json"
TESTSET_PATH = FIXTURES / "testset.json"
TESTSET = json.loads(TESTSET_PATH.read_text())
VALID = json.loads((FIXTURES / "valid.json").read_text())
TEXTS = json.loads((FIXTURES / "texts.json").read_text())
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
NOT_MISTAKES = {"README.md", "expected.json", "testset.json", "texts.json", "valid.json"}


def valid() -> dict:
    return copy.deepcopy(VALID)


def messages(problems: list[Problem]) -> list[str]:
    return [str(p) for p in problems]


# --- one fixture per mistake ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_malformed_fixture_is_rejected_with_one_precise_problem(name):
    problems = validate_file(FIXTURES / name, testset_path=TESTSET_PATH, phase="B", texts=TEXTS)
    assert len(problems) == 1, messages(problems)
    assert EXPECTED[name] in str(problems[0])


def test_every_fixture_file_is_a_listed_mistake():
    files = {p.name for p in FIXTURES.iterdir()} - NOT_MISTAKES
    assert files == set(EXPECTED)
    assert len(files) >= 20


@pytest.mark.parametrize("phase", [None, "A", "A+", "B", "a+"])
def test_the_valid_submission_passes_in_every_phase(phase):
    assert validate_submission(VALID, testset=TESTSET, phase=phase, texts=TEXTS) == []
    assert validate_file(FIXTURES / "valid.json", testset_path=TESTSET_PATH, phase=phase) == []


def test_problem_reads_as_where_then_message():
    problem = Problem("questions[3].snippets[2] (id q1)", "missing 'text'")
    assert str(problem) == "questions[3].snippets[2] (id q1): missing 'text'"


# --- files, test sets, arguments --------------------------------------------------------------


def test_a_missing_file_is_one_problem_naming_it(tmp_path):
    problems = validate_file(tmp_path / "absent.json")
    assert len(problems) == 1
    assert problems[0].where == str(tmp_path / "absent.json")
    assert problems[0].message.startswith("cannot read")


def test_not_json_names_line_and_column(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"questions": []\n,,}')
    [problem] = validate_file(path)
    assert problem.where == str(path)
    assert "(line 2, column 2)" in problem.message


def test_an_unknown_phase_is_a_caller_error():
    with pytest.raises(ValueError, match="unknown phase 'C'"):
        validate_submission(VALID, phase="C")


def test_a_broken_test_set_is_a_caller_error(tmp_path):
    with pytest.raises(FormatError, match=r"questions\[0\] needs an 'id' and a BioASQ 'type'"):
        validate_submission(VALID, testset={"questions": [{"id": "q1", "type": "essay"}]})
    broken = tmp_path / "testset.json"
    broken.write_text("{")
    with pytest.raises(FormatError, match="cannot read the test set"):
        validate_file(FIXTURES / "valid.json", testset_path=broken)


# --- phases -----------------------------------------------------------------------------------


def test_phase_a_needs_documents_and_snippets_but_no_answers():
    submission = valid()
    for question in submission["questions"]:
        question.pop("exact_answer", None)
        question.pop("ideal_answer")
    assert validate_submission(submission, testset=TESTSET, phase="A") == []
    del submission["questions"][0]["documents"]
    submission["questions"][1]["snippets"] = None
    assert messages(validate_submission(submission, testset=TESTSET, phase="A")) == [
        "questions[0] (id 6415a2c1690f196b51000001): phase A needs 'documents' (a list, possibly empty)",
        "questions[1] (id 6415a2c1690f196b51000002): phase A needs 'snippets' (a list, possibly empty)",
    ]


def test_phase_a_plus_needs_answers_except_a_summary_exact_answer():
    submission = {"questions": [{"id": q["id"]} for q in TESTSET["questions"]]}
    problems = validate_submission(submission, testset=TESTSET, phase="A+")
    needs = [p.message for p in problems]
    assert needs.count("phase A+ needs an ideal_answer") == 4
    assert [n for n in needs if "exact_answer" in n] == [
        "phase A+ needs an exact_answer for a yesno question",
        "phase A+ needs an exact_answer for a factoid question",
        "phase A+ needs an exact_answer for a list question",
    ]


def test_without_a_phase_answers_and_retrieval_are_optional():
    bare = {"questions": [{"id": q["id"]} for q in TESTSET["questions"]]}
    assert validate_submission(bare, testset=TESTSET) == []


# --- details that the fixtures do not pin -----------------------------------------------------


def test_what_quorum_writes_is_accepted():
    # exact_answer_shape gives the answers; best_snippets adds a "score" key BioASQ ignores.
    submission = valid()
    answers = {"yesno": ["Yes, it is."], "factoid": ["serine protease"], "list": ["a", "b"]}
    for question in submission["questions"]:
        qtype = question["type"]
        question["exact_answer"] = exact_answer_shape(qtype, answers.get(qtype, []))
        question["snippets"][0]["score"] = 0.87
    assert validate_submission(submission, testset=TESTSET, phase="B", texts=TEXTS) == []


def test_stored_text_checks_skip_unknown_pmids_and_read_both_sections():
    submission = valid()
    snippet = submission["questions"][0]["snippets"][0]
    assert validate_submission(submission, texts={"99": {"title": "", "abstract": ""}}) == []
    # From the end of the title into the abstract: offsets are checked, the text cannot be.
    title = TEXTS["31000001"]["title"]
    snippet.update(beginSection="title", offsetInBeginSection=len(title), offsetInEndSection=40)
    assert validate_submission(submission, texts=TEXTS) == []
    snippet["offsetInBeginSection"] = len(title) + 1
    [problem] = validate_submission(submission, texts=TEXTS)
    assert "offsetInBeginSection 65 is past the end of the stored title (64 characters)" in str(
        problem
    )


def test_without_a_type_the_answer_is_judged_by_its_shape():
    submission = {"questions": [{"id": "q1", "exact_answer": ["TNF", "IL-6"]}, {"id": "q2"}]}
    submission["questions"][1]["exact_answer"] = "YES"
    assert messages(validate_submission(submission)) == [
        "questions[0] (id q1): list exact_answer is a flat list of strings; wrap each item in "
        'its own list of synonyms: [["TNF"], ["IL-6"]]'
    ]
    for question in submission["questions"]:
        question["ideal_answer"] = "An answer."
    assert [p.message for p in validate_submission(submission, phase="B")][1:] == [
        "yesno exact_answer must be lower case 'yes', got 'YES'"
    ]


def test_several_mistakes_are_all_reported_in_order():
    submission = valid()
    submission["questions"][0]["documents"] = ["123", "https://www.ncbi.nlm.nih.gov/pubmed/4"]
    submission["questions"][2]["exact_answer"] = [["casirivimab"], []]
    problems = validate_submission(submission, testset=TESTSET, phase="B")
    assert [p.where for p in problems] == [
        "questions[0].documents[0] (id 6415a2c1690f196b51000001)",
        "questions[0].documents[1] (id 6415a2c1690f196b51000001)",
        "questions[2].exact_answer[1] (id 6415a2c1690f196b51000003)",
    ]


# --- content: the answer contract at a submission's one word -----------------------------------


@pytest.mark.parametrize("phase", [None, "B"])
@pytest.mark.parametrize(
    ("index", "changes", "problem"),
    [
        (2, {"ideal_answer": "][{"}, "the ideal answer '][{' is not a sentence (0 word(s))"),
        (2, {"ideal_answer": "} {{"}, "is not a sentence"),
        (3, {"ideal_answer": "%% -- ** ## !! a"}, "is mostly symbols, not prose"),
        (1, {"ideal_answer": '{"exact": ["protease"]}'}, "is JSON, not prose"),
        (1, {"exact_answer": []}, "the factoid exact answer is empty"),
        (2, {"exact_answer": []}, "the list exact answer is empty"),
        (0, {"exact_answer": "no"}, "the ideal answer says 'yes' where the exact answer says 'no'"),
    ],
)
def test_junk_answers_are_warnings_at_both_levels(index, changes, problem, phase):
    submission = valid()
    submission["questions"][index].update(changes)
    testset = TESTSET if phase else None
    [found] = validate_submission(submission, testset=testset, phase=phase)
    assert problem in found.message and found.warning  # BioASQ takes it; the contract does not
    assert found.where == f"questions[{index}] (id {VALID['questions'][index]['id']})"


@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_an_insufficient_evidence_answer_passes_with_its_empty_exact_answer(index):
    submission = valid()
    question = submission["questions"][index]
    question["ideal_answer"] = insufficient_answer("no model could answer from the evidence found")
    if question["type"] in ("factoid", "list"):
        question["exact_answer"] = []
    elif question["type"] == "yesno":
        question["exact_answer"] = "no"
    assert validate_submission(submission, testset=TESTSET, phase="A+", texts=TEXTS) == []


def test_one_word_ideal_answers_pass_as_the_golden_files_hold_them():
    submission = valid()
    submission["questions"][0]["ideal_answer"] = "Yes."
    submission["questions"][1]["ideal_answer"] = ["MTH1"]
    assert validate_submission(submission, testset=TESTSET, phase="B") == []


def test_a_shape_problem_is_not_reported_again_as_content():
    submission = valid()
    submission["questions"][1]["exact_answer"] = [["serine protease"], []]
    submission["questions"][2]["ideal_answer"] = ""
    assert [p.message for p in validate_submission(submission, testset=TESTSET, phase="B")] == [
        "empty list of synonyms; give at least one name or drop the item",
        "ideal_answer is an empty string",
    ]


# --- the organisers' golden files (excerpts; all 25 files: tests/tools/check_shared.py) ---------


@pytest.mark.parametrize("path", [GOLDEN, *GOLDEN_SLIPS.values()], ids=lambda p: p.name)
def test_golden_questions_pass_the_format_check(path):
    assert messages(validate_file(path)) == []


@pytest.mark.parametrize(
    ("name", "slip"),
    [
        ("8B5", "yesno exact_answer must be lower case 'yes', got 'Yes'"),
        ("7B2", "offsetInBeginSection must be non-negative, got -1"),
        ("9B2", "empty string as a synonym"),
    ],
)
def test_golden_slips_are_problems_in_a_submission(name, slip):
    problems = validate_file(GOLDEN_SLIPS[name], phase="B")
    over_limit = [p for p in problems if "are allowed" in p.message]
    assert over_limit  # golden files list every relevant document and snippet
    assert [p.message for p in problems if p not in over_limit] == [slip]


def test_a_submission_built_from_a_golden_file_passes():
    questions = load_questions(GOLDEN)  # documents come back as bare PMIDs
    testset = {"questions": [{"id": q.id, "body": q.body, "type": q.type} for q in questions]}
    submission = {
        "questions": [
            {
                "id": q.id,
                "documents": [pubmed_url(pmid) for pmid in q.documents[:10]],
                "snippets": q.snippets[:10],
                "exact_answer": q.exact_answer,
                "ideal_answer": q.ideal_answer,
            }
            for q in questions
        ]
    }
    assert validate_submission(submission, testset=testset, phase="A") == []
    assert validate_submission(submission, testset=testset, phase="B") == []
    submission["questions"][0]["documents"] = questions[0].documents[:10]
    problems = validate_submission(submission, testset=testset, phase="B")
    assert problems and all("bare PMID" in p.message for p in problems)


def test_an_integer_question_id_is_named_as_such_not_as_missing(tmp_path):
    # Issue 48: {"id": 5} was reported as "missing 'id'".

    path = tmp_path / "t.json"
    path.write_text('{"questions": [{"id": 5, "body": "Is it?", "type": "yesno"}]}')
    with pytest.raises(FormatError, match=r"'id' must be a non-empty string, got int 5"):
        load_questions(path)
    path.write_text('{"questions": [{"body": "Is it?", "type": "yesno"}]}')
    with pytest.raises(FormatError, match=r"missing 'id'"):
        load_questions(path)


# --- content warns, the format fails ------------------------------------------------------------


def test_a_golden_file_whose_ideal_answers_repeat_themselves_passes_with_warnings():
    problems = validate_file(REPEATS)
    assert errors(problems) == [] and len(problems) == 3
    assert all(p.warning and "repeats itself" in p.message for p in problems)
    assert [p.message.split("(")[-1].split()[0] for p in problems] == ["79%", "87%", "83%"]


def test_quorum_s_own_answer_is_refused_by_the_rule_the_validator_warns_by():
    questions = json.loads(REPEATS.read_text())["questions"]
    loops = [q["ideal_answer"][-1] for q in questions if q["type"] == "summary"]
    assert len(loops) == 3
    for loop in loops:
        assert "repeats itself" in answer_problem("summary", None, loop)


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n in EXPECTED
        if n
        not in {
            "ideal_answer_debris.json",
            "ideal_answer_json.json",
            "factoid_empty_answer.json",
            "list_empty_answer.json",
            "yesno_contradiction.json",
        }
    ),
)
def test_what_bioasq_would_refuse_is_an_error_never_a_warning(name):
    problems = validate_file(FIXTURES / name, testset_path=TESTSET_PATH, phase="B", texts=TEXTS)
    assert errors(problems) == problems


@pytest.mark.parametrize(
    "name",
    [
        "ideal_answer_debris.json",
        "ideal_answer_json.json",
        "factoid_empty_answer.json",
        "list_empty_answer.json",
        "yesno_contradiction.json",
    ],
)
def test_content_the_contract_refuses_is_a_warning(name):
    [problem] = validate_file(FIXTURES / name, testset_path=TESTSET_PATH, phase="B", texts=TEXTS)
    assert problem.warning and errors([problem]) == []
