import gzip
import json

import pytest

from graphs.eval.ensemble import (
    METRICS,
    Case,
    evaluate_ensemble,
    exact_match,
    load_cases,
    mcnemar,
    score_case,
    squad_normalize,
    substring_match,
    table,
    token_f1,
    with_models,
    wrong_concentration,
)
from infra.bioasq.formats import FormatError
from tests.support.data import GOLDEN, NQ
from tests.support.fakes import pmids_in, script


@pytest.fixture(scope="module")
def nq_cases() -> list[Case]:
    return load_cases(NQ, limit=30)


def test_nq_gold_passage_once_among_distractors_without_the_answer(nq_cases):
    assert len(nq_cases) == 30
    assert [c.gold_pmid for c in nq_cases] == [str(n) for n in range(1, 31)]  # line numbers
    for case in nq_cases:
        ids = [c["pmid"] for c in case.contexts]
        assert case.qtype == "factoid" and case.gold
        assert ids.count(case.gold_pmid) == 1 and len(set(ids)) == len(ids) <= 10
        gold_text = next(c["abstract"] for c in case.contexts if c["pmid"] == case.gold_pmid)
        for doc in case.contexts:
            if doc["pmid"] == case.gold_pmid:
                continue
            words = f" {squad_normalize(doc['title'] + ' ' + doc['abstract'])} "
            assert not any(f" {squad_normalize(a)} " in words for a in case.gold)
            assert doc["abstract"] != gold_text
    # Distractors come from the whole file, not only the first 30 questions.
    assert any(int(c["pmid"]) > 30 for case in nq_cases for c in case.contexts)
    # 100 passages fill most lists; on the full file 28 of 30 (tests/tools/check_shared.py).
    assert sum(len(c.contexts) == 10 for c in nq_cases) >= 15


def test_nq_positions_are_seeded(nq_cases):
    again = load_cases(NQ, limit=30)
    assert [c.contexts for c in again] == [c.contexts for c in nq_cases]
    positions = [[d["pmid"] for d in c.contexts].index(c.gold_pmid) for c in nq_cases]
    assert len(set(positions)) > 3  # spread over the list, not always first
    reseeded = load_cases(NQ, limit=30, seed=1)
    moved = [[d["pmid"] for d in c.contexts].index(c.gold_pmid) for c in reseeded]
    assert moved != positions
    # The same distractors, only the gold passage moves.
    assert [sorted(d["pmid"] for d in c.contexts) for c in reseeded] == [
        sorted(d["pmid"] for d in c.contexts) for c in nq_cases
    ]
    alone = load_cases(NQ, limit=2, distractors=0)
    assert [[d["pmid"] for d in c.contexts] for c in alone] == [["1"], ["2"]]


def test_bioasq_yesno_cases():
    cases = load_cases(GOLDEN)
    assert len(cases) == 7
    assert all(c.qtype == "yesno" and c.gold in (["yes"], ["no"]) for c in cases)
    for case in cases:
        ids = [c["pmid"] for c in case.contexts]
        assert ids and len(set(ids)) == len(ids) and case.gold_pmid is None
    assert len(load_cases(GOLDEN, limit=5)) == 5


def test_bad_files_name_the_place(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"question": "q", "answers": ["a"], "ctxs": [{"title": "t", "text": "x"}]}\n'
        '{"question": "q", "ctxs": []}\n'
    )
    with pytest.raises(FormatError, match=r"bad\.jsonl:2: .*\(missing 'answers'\)"):
        load_cases(bad)
    bad.write_text("{not json\n")
    with pytest.raises(FormatError, match=r"bad\.jsonl:1: not a NaturalQuestions-open record"):
        load_cases(bad)
    no_answer = tmp_path / "empty.jsonl.gz"
    no_answer.write_bytes(gzip.compress(b'{"question": "q", "answers": [" "], "ctxs": [{}]}\n'))
    with pytest.raises(FormatError, match=r"empty\.jsonl\.gz:1: .*no gold answer"):
        load_cases(no_answer)
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_text("plain text")
    with pytest.raises(FormatError, match=r"fake\.jsonl\.gz: cannot read"):
        load_cases(fake)
    other = tmp_path / "data.csv"
    other.write_text("a,b\n")
    with pytest.raises(FormatError, match=r"data\.csv: expected"):
        load_cases(other)


def test_squad_metrics():
    assert squad_normalize("The Cat's  hat!") == "cats hat"
    assert exact_match("the Beatles", ["Rolling Stones", "Beatles"]) == 1.0
    assert exact_match("Beatles songs", ["Beatles"]) == 0.0
    assert substring_match("Wilhelm Conrad Röntgen, of Germany", ["Wilhelm Conrad Röntgen"]) == 1.0
    assert substring_match("Röntgen", ["Wilhelm Conrad Röntgen"]) == 0.0  # gold inside prediction
    assert substring_match("", ["x"]) == 0.0 and substring_match("x", [""]) == 0.0
    assert exact_match("", [""]) == 0.0
    assert token_f1("Conrad Röntgen", ["Wilhelm Conrad Röntgen"]) == pytest.approx(0.8)
    assert token_f1("Röntgen", ["Curie", "Röntgen"]) == 1.0
    assert token_f1("", ["x"]) == 0.0 and token_f1("the", ["a"]) == 0.0


def test_mcnemar_counts_discordant_pairs():
    reference = [True, True, False, False, True]
    other = [True, False, True, True, True]
    assert mcnemar(reference, other) == {"b": 2, "c": 1, "p_value": 1.0}
    assert mcnemar([False] * 10, [True] * 10) == {"b": 10, "c": 0, "p_value": 0.001953}
    assert mcnemar([True, False], [True, False]) == {"b": 0, "c": 0, "p_value": 1.0}


def test_wrong_answer_concentration():
    answers = ["Paris", "paris!", "Lyon", "Berlin"]
    assert wrong_concentration(answers, [False, False, False, True]) == pytest.approx(2 / 3)
    assert wrong_concentration(["a", "b"], [True, True]) is None
    assert wrong_concentration([], []) is None


def test_score_case_reads_the_update():
    case = Case("q?", "factoid", [{"pmid": "7"}, {"pmid": "8"}], ["Paris"], gold_pmid="7")
    update = {
        "votes": {"ranked": ["Paris", "Lyon"], "agreement": 0.5, "distinct": 2},
        "members": [
            {"answer": ["Paris"], "pmids": ["7"], "error": None},
            {"answer": ["Lyon"], "pmids": ["8"], "error": None},
            {"answer": [], "pmids": [], "error": "timeout"},
        ],
        "calls": [{"input_tokens": 100, "output_tokens": 5}] * 3,
    }
    row = score_case(case, update)
    assert row["correct"] and row["exact_match"] == row["f1"] == 1.0 and row["accuracy"] is None
    assert row["llm_calls"] == 3 and row["tokens"] == 315 and row["failed_members"] == 1
    assert row["gold_citation"] == 0.5 and row["wrong_concentration"] == 1.0
    empty = score_case(case, {"votes": {"ranked": []}, "members": [], "calls": []})
    assert not empty["correct"] and empty["exact_match"] == 0.0 and empty["gold_citation"] is None
    yesno = Case("q?", "yesno", [{"pmid": "7"}], ["no"])
    row = score_case(yesno, {"votes": {"ranked": ["No"]}, "members": [], "calls": []})
    assert row["accuracy"] == 1.0 and row["exact_match"] is None


def test_with_models_repeats_or_cuts_the_list(settings):
    three = with_models(settings, 3)
    assert len(three.models.ensemble) == 3
    assert {s.key for s in three.models.ensemble} == {settings.models.ensemble[0].key}
    assert len(with_models(three, 2).models.ensemble) == 2


async def test_evaluate_single_and_permute_vote_on_nq(make_context, nq_cases):
    cases = nq_cases[:3]
    gold = {c.question: (c.gold[0], c.gold_pmid) for c in cases}

    def answer(messages, kwargs):
        prompt = messages[-1].content
        text, pmid = next(v for q, v in gold.items() if f"Question: {q}" in prompt)
        assert pmid in pmids_in(messages)  # every context is shown, the gold one too
        return {"answer": [text], "pmids": [pmid]}

    model = script(ensemble=answer)
    report = await evaluate_ensemble(
        make_context(model), cases, ["single", "moi"], dataset="nq.jsonl.gz"
    )
    assert json.dumps(report)
    assert set(report) == {
        "dataset",
        "questions",
        "contexts",
        "correct_by",
        "reference",
        "strategies",
    }
    assert report["questions"] == 3 and report["contexts"] == 10
    assert list(report["strategies"]) == ["single", "moi", "permute_vote"]
    assert "prompt log-probabilities" in report["strategies"]["moi"]["unavailable"]
    single, reference = report["strategies"]["single"], report["strategies"]["permute_vote"]
    for result in (single, reference):
        assert set(result) == {*METRICS, "mcnemar"}
        assert result["exact_match"] == result["substring_em"] == result["f1"] == 1.0
        assert result["gold_citation"] == 1.0 and result["agreement"] == 1.0
        assert result["wrong_concentration"] is None and result["accuracy"] is None
    assert single["llm_calls"] == 1 and reference["llm_calls"] == 3  # ensemble.members = 3
    assert single["mcnemar"] == {"b": 0, "c": 0, "p_value": 1.0} and reference["mcnemar"] is None
    lines = table(report)
    assert any(line.startswith("moi") and "unavailable" in line for line in lines)
    assert any(line.startswith("single") and "0/0" in line for line in lines)


def test_bioasq_snippet_without_document_is_a_format_error(tmp_path):
    bad = tmp_path / "golden.json"
    question = {"id": "q1", "body": "Is it?", "type": "yesno", "exact_answer": "yes"}
    bad.write_text(json.dumps({"questions": [{**question, "snippets": [{"text": "x"}]}]}))
    with pytest.raises(FormatError, match=r"golden\.json: question q1: a snippet without"):
        load_cases(bad)
