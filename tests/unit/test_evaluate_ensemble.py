import gzip
import json
from collections import Counter

import pytest

from infra.bioasq.formats import FormatError
from infra.stats import mcnemar
from lab.trials.answers import (
    exact_match,
    normalize,
    substring_match,
    token_f1,
    wrong_concentration,
)
from lab.trials.ensemble import (
    METRICS,
    Case,
    evaluate_ensemble,
    load_cases,
    score_case,
    table,
    with_models,
)
from nodes.ensemble.views import permuted_views
from nodes.seeds import question_seed
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
            words = f" {normalize(doc['title'] + ' ' + doc['abstract'])} "
            assert not any(f" {normalize(a)} " in words for a in case.gold)
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
    assert normalize("The Cat's  hat!") == "cats hat"
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
        # The decision is scored, not the vote table's first row (here they differ on purpose).
        "votes": {"ranked": ["Lyon", "Paris"], "agreement": 0.5, "distinct": 2},
        "decision": {"answers": [{"answer": "Paris", "support": 1.0, "cited": ["7"]}]},
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
    empty = score_case(case, {"votes": {"ranked": ["Paris"]}, "members": [], "calls": []})
    assert not empty["correct"] and empty["exact_match"] == 0.0 and empty["gold_citation"] is None
    yesno = Case("q?", "yesno", [{"pmid": "7"}], ["no"])
    decided = {"answers": [{"answer": "No", "support": 2.0, "cited": []}]}
    row = score_case(yesno, {"decision": decided, "members": [], "calls": []})
    assert row["accuracy"] == 1.0 and row["exact_match"] is None


def test_with_models_repeats_or_cuts_the_list(settings):
    three = with_models(settings, 3)
    assert len(three.models.ensemble) == 3
    assert {s.key for s in three.models.ensemble} == {settings.models.ensemble[0].key}
    assert len(with_models(three, 2).models.ensemble) == 2


def biased_cases() -> list[Case]:
    """Four questions of three passages, the gold one at position 0, 1, 2 and 0."""
    cases = []
    for number, gold_at in enumerate([0, 1, 2, 0]):
        ids = [f"{number}{k}" for k in range(3)]
        contexts = [
            {"pmid": i, "title": f"t{i}", "abstract": f"text {i}", "score": 1.0} for i in ids
        ]
        cases.append(
            Case(f"question {number}?", "factoid", contexts, [f"Gold{number}"], ids[gold_at])
        )
    return cases


def first_passage_reader(cases):
    """A reader with a primacy bias: it answers from whichever passage it is shown first."""
    by_question = {c.question: c for c in cases}

    def answer(messages, kwargs):
        prompt = messages[-1].content
        case = next(c for q, c in by_question.items() if f"Question: {q}" in prompt)
        first = pmids_in(messages)[0]
        said = case.gold[0] if first == case.gold_pmid else f"Wrong{first}"
        return {"answer": said, "pmids": [first]}

    return answer


def majority_of_first_passages(case, members=5, seed=13):
    """Return whether permute_vote is right, from the orders it shows (the oracle's own count)."""
    views = permuted_views(3, members, 3, question_seed(seed, case.question))
    firsts = Counter(case.contexts[view[0]]["pmid"] for view in views)
    top = max(firsts.values())
    winners = [p for p, n in firsts.items() if n == top]
    # Equal votes go to the best rank (every answer is a first answer), then the name:
    # "gold…" sorts before "wrong…".
    return case.gold_pmid in winners


async def test_evaluation_scores_each_strategy_s_decision_against_a_biased_reader(make_context):
    cases = biased_cases()
    model = script(ensemble=first_passage_reader(cases))
    report = await evaluate_ensemble(
        make_context(model), cases, ["single", "moi"], dataset="biased.jsonl"
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
    assert report["questions"] == 4 and report["contexts"] == 3
    assert list(report["strategies"]) == ["single", "moi", "permute_vote"]
    assert "prompt log-probabilities" in report["strategies"]["moi"]["unavailable"]
    single, reference = report["strategies"]["single"], report["strategies"]["permute_vote"]
    for result in (single, reference):
        assert set(result) == {*METRICS, "mcnemar"}
        assert result["wrong_concentration"] is not None and result["accuracy"] is None
    # single shows the given order: right exactly where the gold passage comes first.
    assert single["exact_match"] == single["substring_em"] == single["gold_citation"] == 0.5
    assert single["llm_calls"] == 1 and reference["llm_calls"] == 5  # ensemble.members = 5
    expected = [majority_of_first_passages(c) for c in cases]
    assert reference["substring_em"] == sum(expected) / 4
    right_single = [True, False, False, True]
    b = sum(s and not r for s, r in zip(right_single, expected, strict=True))
    c = sum(r and not s for s, r in zip(right_single, expected, strict=True))
    assert (single["mcnemar"]["b"], single["mcnemar"]["c"]) == (b, c)
    assert reference["mcnemar"] is None
    lines = table(report)
    assert any(line.startswith("moi") and "unavailable" in line for line in lines)
    assert any(line.startswith("single") and f"{b}/{c}" in line for line in lines)


def test_bioasq_snippet_without_document_is_a_format_error(tmp_path):
    bad = tmp_path / "golden.json"
    question = {"id": "q1", "body": "Is it?", "type": "yesno", "exact_answer": "yes"}
    bad.write_text(json.dumps({"questions": [{**question, "snippets": [{"text": "x"}]}]}))
    with pytest.raises(FormatError, match=r"golden\.json: question q1: a snippet without"):
        load_cases(bad)
