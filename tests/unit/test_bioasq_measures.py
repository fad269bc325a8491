import copy
import json
import math
from pathlib import Path

import pytest

from infra.bioasq.formats import FormatError
from infra.bioasq.measures import (
    EPSILON,
    challenge_version,
    evaluate_phase_a,
    evaluate_phase_b,
)
from infra.bioasq.rouge import ROUGE_KEYS, rouge
from tests.support.data import GOLDEN

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "bioasq_eval"
URL = "http://www.ncbi.nlm.nih.gov/pubmed/"


def _load(name):
    return json.loads((FIXTURES / name).read_text())


def _snippet(doc, begin, end, section="abstract"):
    return {
        "document": doc,
        "beginSection": section,
        "endSection": section,
        "offsetInBeginSection": begin,
        "offsetInEndSection": end,
    }


def _question(qid, **fields):
    return {"id": qid, "body": f"{qid}?", **fields}


def _check(got, expected):
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key


def test_edition_maps_to_the_evaluators_version_switch():
    editions = (1, 2, 3, 4, 5, 7, 8, 9, 11, 13)
    assert [challenge_version(e) for e in editions] == [2, 2, 3, 3, 5, 5, 8, 9, 9, 9]
    with pytest.raises(ValueError):
        challenge_version(0)


# Phase A fixture, per question (snippet offsets are inclusive: a 0-99 snippet has 100 chars):
# a1 documents [D2, X1, D1, D2, X2] -> duplicate dropped -> [D2, X1, D1, X2] against gold
#    [D1, D2, D3]: P 2/4, R 2/3, F 4/7; AP (1/1 + 2/3) / min(10, 3) = 5/9.
#    snippets: D1 50-149 and D1 140-159 merge into 50-159 (110 chars, 50 overlap gold D1 0-99);
#    D1 "sections.0" 0-9 counts against gold "abstract" 0-99 (10 chars); D9 0-9 is off gold.
#    P 60/130, R 60/120, F 12/25; AP (50/110 * 1 + 60/120 * 1 + 60/130 * 0) / min(10, 2) = 21/44.
# a2 documents [X3, D4] against [D4]: P 1/2, R 1, F 2/3, AP (1/2) / 1.
#    snippets D4 0-19 (10 chars inside gold 10-59) then D4 100-119 (outside, but same document):
#    P 10/40, R 10/50, F 2/9; AP (10/20 + 10/40) / 1 = 3/4: the second counts as relevant
#    although it overlaps nothing (relevanceSnippet's stray semicolon).
# a3 all 12 gold documents, reversed: P = R = F = 1, AP 12 / min(10, 12) = 6/5 (above 1: the
#    evaluator never cuts a submission to 10). No snippets: all 0.
# a5 gold without documents or snippets: skipped from edition 9 on; before, documents score 0
#    and the snippet AP is 0/0 = NaN (edition 8), read as 0 in MAP and as log 1 in GMAP.
# a6 nothing submitted: all 0. a4 is not submitted and is skipped; zz is not in gold.
# Edition 5 divides every AP by 10; edition 2 by |gold| (a3: 12/12; a5 snippets: 0/0).
@pytest.mark.parametrize("edition", ["11", "8", "5", "2"])
def test_phase_a_fixture_matches_hand_computation(edition):
    gold, submission = _load("phase_a_gold.json"), _load("phase_a_submission.json")
    before = copy.deepcopy((gold, submission))
    got = evaluate_phase_a(gold, submission, edition=int(edition))
    _check(got, _load("phase_a_expected.json")[edition])
    assert (gold, submission) == before


def test_phase_a_gmap_spelled_out():
    got = evaluate_phase_a(_load("phase_a_gold.json"), _load("phase_a_submission.json"))
    logs = [math.log(ap + EPSILON) for ap in (5 / 9, 1 / 2, 6 / 5, 0)]
    assert got["documents_gmap"] == pytest.approx(math.exp(sum(logs) / 4))
    logs = [math.log(ap + EPSILON) for ap in (21 / 44, 3 / 4, 0, 0)]
    assert got["snippets_gmap"] == pytest.approx(math.exp(sum(logs) / 4))


def test_documents_are_compared_as_whole_strings_but_snippets_by_pmid_for_overlap():
    gold = {
        "questions": [_question("q", documents=[URL + "1"], snippets=[_snippet(URL + "1", 0, 9)])]
    }
    bare = {"questions": [_question("q", documents=["1"], snippets=[_snippet("1", 0, 9)])]}
    got = evaluate_phase_a(gold, bare)
    assert got["documents_precision"] == got["documents_recall"] == got["documents_map"] == 0
    # overlap for P/R uses the last URL part; AP compares whole document strings
    assert got["snippets_precision"] == got["snippets_recall"] == got["snippets_f1"] == 1
    assert got["snippets_map"] == 0


def test_overlapping_submitted_snippets_are_merged_before_counting():
    gold = {
        "questions": [_question("q", documents=[URL + "1"], snippets=[_snippet(URL + "1", 0, 29)])]
    }
    parts = [_snippet(URL + "1", 0, 9), _snippet(URL + "1", 20, 29), _snippet(URL + "1", 5, 24)]
    got = evaluate_phase_a(gold, {"questions": [_question("q", snippets=parts)]})
    # unmerged, 40 overlapping characters would give recall 40/30
    assert got["snippets_precision"] == got["snippets_recall"] == got["snippets_map"] == 1


def test_phase_a_with_nothing_to_score_reports_what_the_java_prints():
    gold = {"questions": [_question("q", documents=[URL + "1"])]}
    got = evaluate_phase_a(gold, {"questions": []})
    assert got["questions"] == 0
    assert got["documents_precision"] == got["documents_recall"] == got["snippets_gmap"] == 0
    assert math.isnan(got["documents_f1"]) and math.isnan(got["snippets_map"])


# Phase B fixture, per question (names are lower-cased, never trimmed or normalised):
# yes/no: y1 "Yes" right; y2 "no" for "yes" wrong; y3 "No, it isn't" reads "no", right; y4
#   "unknown" contains "no", so reads "no", right. y5 not submitted: skipped. Accuracy 3/4.
#   y2 is the only error: F1 yes = 2*1 / (2*1 + 1) = 2/3, F1 no = 2*2 / (2*2 + 1) = 4/5; macro
#   11/15.
# factoid: f1 "Interleukin 6" is gold's 2nd synonym at rank 1 (1, 1, 1); f2 "Breast Cancer 1"
#   matches the 2nd gold entry at rank 3 (0, 1, 1/3); f3 [["TP53", "p53"], ["p53 "]]: only the
#   first name of a submitted entry counts and "p53 " keeps its space (0, 0, 0); f4 matches at
#   rank 6, no cut at 5 (0, 1, 1/6). Strict 1/4, lenient 3/4, MRR (1 + 1/3 + 1/6) / 4 = 3/8.
# list: l1 [Nova-1, SRRM4, srrm4, xyz] against [Srrm4], [Nova1, NOVA-1], [Rbfox1]: Nova-1 and
#   SRRM4 hit, the repeated srrm4 and xyz miss, Rbfox1 is missed: P 2/4, R 2/3, F 4/7; l2 empty
#   list and l3 no exact answer score 0. Means P 1/6, R 2/9, F 4/21.
# s1 (summary, no gold exact answer) is skipped from edition 9 on, counted (and scores nothing)
#   before.
@pytest.mark.parametrize("edition", ["11", "8"])
def test_phase_b_fixture_matches_hand_computation(edition):
    gold, submission = _load("phase_b_gold.json"), _load("phase_b_submission.json")
    before = copy.deepcopy((gold, submission))
    got = evaluate_phase_b(gold, submission, edition=int(edition))
    _check(got, _load("phase_b_expected.json")[edition])
    assert (gold, submission) == before


def test_submitted_synonyms_count_before_edition_5_only():
    gold = {"questions": [_question("f", type="factoid", exact_answer=[["p53"]])]}
    submission = {"questions": [_question("f", exact_answer=[["TP53", "p53"]])]}
    assert evaluate_phase_b(gold, submission, edition=4)["factoid_strict_accuracy"] == 1
    assert evaluate_phase_b(gold, submission, edition=5)["factoid_strict_accuracy"] == 0


def test_empty_submitted_entries_are_skipped_not_counted():
    # The evaluator reads an entry's names with `while (reader.hasNext())`, so [] adds no entry:
    # the official Java scores this 1 (strict, MRR) and P 1, R 1/2; an empty entry kept would give
    # strict 0, MRR 1/2 and P 1/2.
    gold = {
        "questions": [
            _question("f", type="factoid", exact_answer=[["p53"]]),
            _question("l", type="list", exact_answer=[["a"], ["b"]]),
        ]
    }
    submission = {
        "questions": [
            _question("f", exact_answer=[[], ["p53"]]),
            _question("l", exact_answer=[["a"], []]),
        ]
    }
    got = evaluate_phase_b(gold, submission)
    assert got["factoid_strict_accuracy"] == got["factoid_mrr"] == 1
    assert (got["list_precision"], got["list_recall"]) == (1, 0.5)


def test_flat_factoid_answers_are_refused_after_edition_2():
    gold = {"questions": [_question("f", type="factoid", exact_answer=["p53", "tp53"])]}
    submission = {"questions": [_question("f", exact_answer=["TP53", "x"])]}
    with pytest.raises(FormatError, match="list of lists"):
        evaluate_phase_b(gold, submission, edition=11)
    got = evaluate_phase_b(gold, submission, edition=2)
    assert (got["factoid_strict_accuracy"], got["factoid_lenient_accuracy"]) == (0, 1)
    assert got["factoid_mrr"] == 1


def test_yes_no_macro_f1_with_a_single_class():
    gold = {"questions": [_question(f"y{i}", type="yesno", exact_answer="yes") for i in range(3)]}
    right = {"questions": [_question(f"y{i}", exact_answer="yes") for i in range(3)]}
    got = evaluate_phase_b(gold, right)
    # F1 for "no" is 0 (no "no" anywhere: 2TP + FP + FN = 0), so the macro mean is 1/2
    assert (got["yesno_accuracy"], got["yesno_f1_yes"], got["yesno_f1_no"]) == (1, 1, 0)
    assert got["yesno_macro_f1"] == 0.5
    wrong = {"questions": [_question(f"y{i}", exact_answer="no") for i in range(3)]}
    got = evaluate_phase_b(gold, wrong)
    assert got["yesno_accuracy"] == got["yesno_macro_f1"] == 0


def test_rouge_by_hand():
    # ref: the cat sat on the mat (6 tokens); peer: the cat sat.
    # ROUGE-2: ref bigrams 5, peer 2, both hit: R 2/5, P 1, F 4/7.
    # SU4 (unigrams + skip-bigrams, gap <= 4): ref 6 + 15, peer 3 + 3, hits 3 + 3: R 6/21, F 4/9.
    got = rouge([(["The cat sat on the mat."], "The cat sat.")])
    assert got["rouge2_recall_approx"] == pytest.approx(2 / 5)
    assert got["rouge2_f1_approx"] == pytest.approx(4 / 7)
    assert got["rougesu4_recall_approx"] == pytest.approx(6 / 21)
    assert got["rougesu4_f1_approx"] == pytest.approx(4 / 9)
    # two references pool hits and counts: R (2 + 1) / (5 + 2), P 3 / (2 * 2), F 6/11
    got = rouge([(["The cat sat on the mat.", "A cat sat."], "The cat sat.")])
    assert got["rouge2_recall_approx"] == pytest.approx(3 / 7)
    assert got["rouge2_f1_approx"] == pytest.approx(6 / 11)
    assert rouge([]) == dict.fromkeys(ROUGE_KEYS)


def test_rouge2_agrees_with_rouge_score_on_one_reference():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)
    ref = "Mutations in BRCA1 increase the risk of breast and ovarian cancers."
    peer = "BRCA1 mutations increase breast cancer risk, and ovarian cancer risk."
    expected = scorer.score(ref, peer)["rouge2"]
    got = rouge([([ref], peer)])
    assert got["rouge2_recall_approx"] == pytest.approx(expected.recall)
    assert got["rouge2_f1_approx"] == pytest.approx(expected.fmeasure)


# Real golden questions (28 of 11B1, 7 of each type) against themselves and against a spoiled
# copy, with expectations computed the plain way (sets, interval unions) rather than through the
# evaluator's loops.


@pytest.fixture(scope="module")
def golden():
    return json.loads(GOLDEN.read_text())


def _chars(snippets):
    return {
        (s["document"], s["beginSection"], i)
        for s in snippets
        for i in range(s["offsetInBeginSection"], s["offsetInEndSection"] + 1)
    }


def _runs(snippets):
    """Count snippets left once those sharing a character (same document, section) are merged."""
    spans = sorted(
        (s["document"], s["beginSection"], s["offsetInBeginSection"], s["offsetInEndSection"])
        for s in snippets
    )
    count, last = 0, None
    for doc, sec, begin, end in spans:
        if last and last[:2] == (doc, sec) and begin <= last[2]:
            last = (doc, sec, max(last[2], end))
        else:
            count, last = count + 1, (doc, sec, end)
    return count


def _mean(values):
    return sum(values) / len(values)


def test_golden_file_against_itself(golden):
    a = evaluate_phase_a(golden, golden)
    questions = golden["questions"]
    assert a["questions"] == a["documents_questions"] == a["snippets_questions"] == 28
    for key in ("precision", "recall", "f1"):
        assert a[f"documents_{key}"] == a[f"snippets_{key}"] == pytest.approx(1)
    doc_aps = [len(q["documents"]) / min(10, len(q["documents"])) for q in questions]
    snip_aps = [_runs(q["snippets"]) / min(10, _runs(q["snippets"])) for q in questions]
    assert a["documents_map"] == pytest.approx(_mean(doc_aps))
    assert a["snippets_map"] == pytest.approx(_mean(snip_aps))
    for key, aps in (("documents_gmap", doc_aps), ("snippets_gmap", snip_aps)):
        assert a[key] == pytest.approx(math.exp(_mean([math.log(x + EPSILON) for x in aps])))
    b = evaluate_phase_b(golden, golden)
    assert (b["yesno_questions"], b["factoid_questions"], b["list_questions"]) == (7, 7, 7)
    for key in ("yesno_accuracy", "yesno_macro_f1", "factoid_strict_accuracy", "factoid_mrr"):
        assert b[key] == 1, key
    assert b["list_precision"] == b["list_recall"] == b["list_f1"] == 1


def _spoil(golden):
    """Reverse and truncate documents, drop every other snippet, get some answers wrong."""
    spoiled = copy.deepcopy(golden)
    by_type = {}
    for q in spoiled["questions"]:
        i = by_type[q["type"]] = by_type.get(q["type"], -1) + 1
        docs = q["documents"][::-1]
        q["documents"] = [docs[0], URL + "99999999", *docs[1:-1]]
        q["snippets"] = [*q["snippets"][::2], _snippet(URL + "99999999", 0, 99)]
        if q["type"] == "yesno" and i % 3 == 0:
            q["exact_answer"] = "no" if q["exact_answer"] == "yes" else "yes"
        elif q["type"] == "factoid":
            right = q["exact_answer"][0][:1]
            q["exact_answer"] = [right, ["wrong"]] if i % 3 == 0 else [["wrong"], right]
            if i % 3 == 2:
                q["exact_answer"] = [["wrong"], ["still wrong"]]
        elif q["type"] == "list":
            q["exact_answer"] = [entry[:1] for entry in q["exact_answer"][:-1]] + [["wrong"]]
    return spoiled


def _f1(p, r):
    return 2 * p * r / (p + r) if p and r else 0.0


def test_golden_file_against_a_spoiled_copy(golden):
    spoiled = _spoil(golden)
    a = evaluate_phase_a(golden, spoiled)
    rows, snip_rows = [], []
    for g, s in zip(golden["questions"], spoiled["questions"], strict=True):
        wanted, found = set(g["documents"]), s["documents"]
        hits = [d in wanted for d in found]
        p, r = sum(hits) / len(found), sum(hits) / len(wanted)
        ap = sum(sum(hits[:k]) / k for k in range(1, len(found) + 1) if hits[k - 1])
        rows.append((p, r, _f1(p, r), ap / min(10, len(wanted))))
        kept, all_chars = _chars(s["snippets"][:-1]), _chars(g["snippets"])
        p, r = len(kept) / (len(kept) + 100), len(kept) / len(all_chars)
        ap = _runs(s["snippets"][:-1]) / min(10, _runs(g["snippets"]))
        snip_rows.append((p, r, _f1(p, r), ap))
    for prefix, table in (("documents", rows), ("snippets", snip_rows)):
        for col, key in enumerate(("precision", "recall", "f1", "map")):
            assert a[f"{prefix}_{key}"] == pytest.approx(_mean([t[col] for t in table])), key
        logs = [math.log(t[3] + EPSILON) for t in table]
        assert a[f"{prefix}_gmap"] == pytest.approx(math.exp(_mean(logs)))

    b = evaluate_phase_b(golden, spoiled)
    pairs = [
        (g["exact_answer"], s["exact_answer"])
        for g, s in zip(golden["questions"], spoiled["questions"], strict=True)
        if g["type"] == "yesno"
    ]
    assert b["yesno_accuracy"] == pytest.approx(_mean([t == p for t, p in pairs]))
    f1s = []
    for label in ("yes", "no"):
        tp = sum(t == p == label for t, p in pairs)
        predicted, actual = sum(p == label for _, p in pairs), sum(t == label for t, _ in pairs)
        f1s.append(_f1(tp / predicted if predicted else 0, tp / actual if actual else 0))
    assert b["yesno_macro_f1"] == pytest.approx(_mean(f1s))
    ranks = [{0: 1, 1: 2, 2: 0}[i % 3] for i in range(7)]
    assert b["factoid_strict_accuracy"] == pytest.approx(_mean([r == 1 for r in ranks]))
    assert b["factoid_lenient_accuracy"] == pytest.approx(_mean([r > 0 for r in ranks]))
    assert b["factoid_mrr"] == pytest.approx(_mean([1 / r if r else 0 for r in ranks]))
    sizes = [len(q["exact_answer"]) for q in golden["questions"] if q["type"] == "list"]
    assert b["list_precision"] == pytest.approx(_mean([(k - 1) / k for k in sizes]))
    assert b["list_recall"] == pytest.approx(_mean([(k - 1) / k for k in sizes]))
    assert b["ideal_questions"] == 28
