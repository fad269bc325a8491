"""Phase B: exact answers, scored as EvaluatorTask1b.EvaluatePhaseB scores them.

Ideal answers are not scored by that evaluator: the ``*_approx`` ROUGE keys are quorum's own.
"""

from __future__ import annotations

from infra.bioasq.measures.parsed import Answer, challenge_version, nz, pairs, total
from infra.bioasq.rouge import rouge
from infra.bioasq.types import QUESTION_TYPES


def _factoid(gold: Answer, response: Answer | None, version: int) -> tuple[float, float, float]:
    """Return strict accuracy, lenient accuracy and reciprocal rank of one factoid answer."""
    if response is None:
        return 0.0, 0.0, 0.0
    if version == 2:
        # SEE: QuestionAnswerEvaluator.strictAccuracy, lenientAccuracy, meanReciprocalRank.
        mine, theirs = response.answers, gold.answers
        strict = bool(mine and theirs and mine[0] == theirs[0])
        rank = next((i for i, a in enumerate(mine, 1) if a in theirs), 0)
    else:
        # SEE: strictAccuracyForLists, lenientAccuracyForLists, meanReciprocalRankForLists: a
        # candidate matches any name of any gold entry; every candidate counts, not only 5.
        found = response.lists
        strict = bool(found and gold.matches(found[0], remove=False))
        rank = next((i for i, c in enumerate(found, 1) if gold.matches(c, remove=False)), 0)
    return float(strict), float(rank > 0), 1 / rank if rank else 0.0


def _listed(gold: Answer, response: Answer | None) -> tuple[float, float, float]:
    """Return precision, recall and F1 of one list answer."""
    # SEE: QuestionAnswerEvaluator.calculatePRFforListQuestions: each submitted entry consumes the
    # gold entry it matches (a repeat is a false positive); gold entries left over are false
    # negatives unless some submitted entry still matches them.
    if response is None or not response.lists:
        return 0.0, 0.0, 0.0
    tp = sum(1 for entry in list(response.lists) if gold.matches(entry, remove=True))
    fp = len(response.lists) - tp
    fn = sum(1 for entry in gold.lists if not response.matches(entry, remove=True))
    precision = tp / (tp + fp)
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else 0.0
    return precision, recall, f1


def _f1_label(yesno: list[tuple[bool, float]], label: bool) -> float:
    # SEE: EvaluatorTask1b.F1ExactAnswersYesNo: F1 = 2TP / (2TP + FP + FN) for one label, 0 when
    # undefined; a missed gold "yes" is filed as FP and a wrong "no" as FN, which F1 cannot tell.
    tp = sum(1 for is_yes, acc in yesno if is_yes == label and acc == 1)
    wrong = sum(1 for _, acc in yesno if acc != 1)
    return 2 * tp / (2 * tp + wrong) if yesno and 2 * tp + wrong else 0.0


def _mean(values: list[float]) -> float:
    # SEE: EvaluatorTask1b.AccuracyExactAnswersYesNo, strictAccuracy, listPrecision, ...: 0 if none.
    return total(nz(v) for v in values) / len(values) if values else 0.0


def evaluate_phase_b(gold: dict, submission: dict, *, edition: int = 11) -> dict[str, float | None]:
    """Score a Phase B submission's exact answers (and, approximately, ideal answers).

    Raises:
        FormatError: when either file has a shape the official evaluator cannot read.
    """
    version = challenge_version(edition)
    counts = dict.fromkeys(QUESTION_TYPES, 0)
    exact = 0
    yesno: list[tuple[bool, float]] = []
    factoid: list[tuple[float, float, float]] = []
    listed: list[tuple[float, float, float]] = []
    ideal: list[tuple[list[str], str]] = []
    for g, r in pairs(gold, submission, version):
        if r is not None and g.ideal:
            ideal.append((g.ideal, " ".join(r.ideal)))
        answer = g.answer
        # SEE: EvaluatorTask1b.EvaluatePhaseB: from BioASQ 9 on, questions without a gold exact
        # answer are skipped. NOTE: unsubmitted questions are skipped in every edition (before
        # BioASQ 9 the Java stops with a NullPointerException on them).
        empty = answer is None or not (answer.label or answer.lists or answer.answers)
        if r is None or g.type is None:
            continue
        counts[g.type] += 1  # every submitted question, a summary too (its ideal is scored)
        if version == 9 and empty:
            continue  # a summary, or a question with no gold exact answer: no exact measure
        exact += 1
        answer = answer or Answer()
        if g.type == "factoid":
            factoid.append(_factoid(answer, r.answer, version))
        elif g.type == "list":
            listed.append(_listed(answer, r.answer))
        elif g.type == "yesno":
            # SEE: QuestionAnswerEvaluator.accuracyYesNo: the parsed labels must be equal (a gold
            # and a submitted "none" agree); no submitted label scores 0.
            mine = r.answer.label if r.answer else None
            acc = 1.0 if mine is not None and mine == answer.label else 0.0
            yesno.append((answer.label == "yes", acc))
    f1_yes, f1_no = _f1_label(yesno, True), _f1_label(yesno, False)
    return {
        # The questions submitted, as documents_questions and ideal_questions count them; the
        # exact measures average over exact_questions (the official evaluator skips summaries
        # and, from BioASQ 9, questions without a gold exact answer).
        "questions": sum(counts.values()),
        "exact_questions": exact,
        **{f"{t}_questions": n for t, n in counts.items()},
        "yesno_accuracy": _mean([acc for _, acc in yesno]),
        "yesno_f1_yes": f1_yes,
        "yesno_f1_no": f1_no,
        "yesno_macro_f1": (f1_yes + f1_no) / 2,
        "factoid_strict_accuracy": _mean([s for s, _, _ in factoid]),
        "factoid_lenient_accuracy": _mean([le for _, le, _ in factoid]),
        "factoid_mrr": _mean([rr for _, _, rr in factoid]),
        "list_precision": _mean([p for p, _, _ in listed]),
        "list_recall": _mean([r for _, r, _ in listed]),
        "list_f1": _mean([f for _, _, f in listed]),
        "ideal_questions": len(ideal),
        **rouge(ideal),
    }
