import json
from collections import Counter

import pytest

from infra.bioasq.formats import FormatError, load_questions, pmid_of
from infra.bioasq.metrics import average_precision, recall_at, snippet_overlap, snippet_recall

URL = "http://www.ncbi.nlm.nih.gov/pubmed/"


def test_recall_at_k():
    assert recall_at(["1", "2", "3"], ["3", "9"], 2) == 0.0
    assert recall_at(["1", "2", "3"], ["3", "9"], 3) == 0.5
    assert recall_at(["1"], [], 10) == 0.0


def test_average_precision_divides_by_min_of_ten_and_gold():
    # relevant at ranks 1 and 3: (1/1 + 2/3) / min(10, 2)
    assert average_precision(["a", "x", "b"], ["a", "b"]) == pytest.approx((1 + 2 / 3) / 2)
    gold = [str(i) for i in range(20)]
    assert average_precision(["0", "1"], gold) == pytest.approx(2 / 10)
    assert average_precision(["x", "y"], ["a"]) == 0.0
    assert average_precision(["a"], []) == 0.0


def test_snippet_overlap_merges_and_matches_by_document_and_section():
    gold = [
        {
            "document": URL + "1",
            "beginSection": "abstract",
            "endSection": "abstract",
            "offsetInBeginSection": 0,
            "offsetInEndSection": 100,
        },
        {
            "document": URL + "1",
            "beginSection": "title",
            "endSection": "title",
            "offsetInBeginSection": 0,
            "offsetInEndSection": 20,
        },
    ]
    found = [
        {
            "document": URL + "1",
            "beginSection": "abstract",
            "endSection": "abstract",
            "offsetInBeginSection": 50,
            "offsetInEndSection": 150,
        },
        {
            "document": URL + "1",
            "beginSection": "abstract",
            "endSection": "abstract",
            "offsetInBeginSection": 60,
            "offsetInEndSection": 70,
        },
        {
            "document": URL + "2",
            "beginSection": "title",
            "endSection": "title",
            "offsetInBeginSection": 0,
            "offsetInEndSection": 20,
        },
    ]
    assert snippet_overlap(found, gold) == (50, 120, 120)
    assert snippet_recall(found, gold) == pytest.approx(50 / 120)


def test_pmid_of_urls_and_plain_ids():
    assert pmid_of(URL + "123") == "123" and pmid_of("456") == "456"
    with pytest.raises(ValueError):
        pmid_of("http://example.org/x")


def test_load_questions_reads_gold_and_rejects_bad_files(tmp_path):
    good = tmp_path / "g.json"
    good.write_text(
        json.dumps(
            {
                "questions": [
                    {
                        "id": "q1",
                        "body": "Is it?",
                        "type": "yesno",
                        "documents": [URL + "7"],
                        "extra": 1,
                    }
                ]
            }
        )
    )
    (q,) = load_questions(good)
    assert (q.id, q.type, q.documents) == ("q1", "yesno", ["7"])
    bad = tmp_path / "b.json"
    bad.write_text('{"questions": [')
    with pytest.raises(FormatError, match=r"b\.json: not JSON \(line 1"):
        load_questions(bad)
    wrong = tmp_path / "w.json"
    wrong.write_text(json.dumps({"questions": [{"id": "q1", "body": "x", "type": "essay"}]}))
    with pytest.raises(FormatError, match=r"questions\[0\] \(q1\): unknown type 'essay'"):
        load_questions(wrong)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"documents": URL + "7"}, r"\(q1\): 'documents' must be a list"),
        ({"snippets": {"document": URL + "7"}}, r"\(q1\): 'snippets' must be a list"),
        ({"snippets": ["some text"]}, r"\(q1\): snippets: every snippet must be an object"),
        ({"snippets": [{"text": 5}]}, r"\(q1\): snippets\[0\]: 'text' must be a string"),
        ({"snippets": [{"document": 7}]}, r"\(q1\): snippets\[0\]: 'document' must be a string"),
    ],
)
def test_load_questions_names_lists_of_the_wrong_shape(tmp_path, fields, message):
    path = tmp_path / "g.json"
    question = {"id": "q1", "body": "Is it?", "type": "yesno", **fields}
    path.write_text(json.dumps({"questions": [question]}))
    with pytest.raises(FormatError, match=message):
        load_questions(path)


def test_the_golden_excerpts_load():
    # All 25 golden files (2,310 questions): `python tests/tools/check_shared.py`.
    from tests.support.data import GOLDEN, GOLDEN_SLIPS

    questions = load_questions(GOLDEN)
    assert len(questions) == 28
    assert Counter(q.type for q in questions) == dict.fromkeys(
        ("yesno", "factoid", "list", "summary"), 7
    )
    assert all(q.documents and q.documents[0].isdigit() for q in questions)  # bare PMIDs
    assert [len(load_questions(path)) for path in GOLDEN_SLIPS.values()] == [2, 2, 2]
