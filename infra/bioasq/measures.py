"""BioASQ Task B measures, computed as the organizers' evaluator (EvaluatorTask1b) computes them.

A port of BioASQ/Evaluation-Measures, flat/BioASQEvaluation/src (commit 8c8e689): the Java's quirks
are kept on purpose so that scores equal the official ones; each is marked with SEE: and the class
and method it mirrors. Concepts and triples (gone since BioASQ 8) are left out. Ideal answers are
not scored by that evaluator: the ``*_approx`` ROUGE keys are this module's own approximation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infra.bioasq.formats import FormatError
from infra.bioasq.rouge import rouge
from infra.bioasq.urls import canonical_url

EPSILON = 0.00001  # SEE: EvaluatorTask1b.epsilon, added to each average precision in GMAP.
_TYPES = ("yesno", "factoid", "list", "summary")


def challenge_version(edition: int) -> int:
    """Return the evaluator's ``-e`` version (2, 3, 5, 8 or 9) for a BioASQ edition."""
    # SEE: EvaluatorTask1b.usage: 2 for BioASQ1&2, 3 for 3&4, 5 for 5-7, 8 for 8, 9 from 9 on.
    if edition < 1:
        raise ValueError(f"no BioASQ edition {edition}")
    return next(v for first, v in ((9, 9), (8, 8), (5, 5), (3, 3), (1, 2)) if edition >= first)


# Java double arithmetic: x/0 is ±Infinity or NaN, log of a negative is NaN; Python would raise.
def _div(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b


def _log(x: float) -> float:
    if math.isnan(x) or x < 0:
        return math.nan
    return -math.inf if x == 0 else math.log(x)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _total(values: Iterable[float]) -> float:
    """Sum left to right like the Java loops (Python 3.12's sum() compensates rounding)."""
    out = 0.0
    for v in values:
        out += v
    return out


def _nz(x: float) -> float:
    return 0.0 if math.isnan(x) else x


@dataclass
class _Snippet:
    document: str
    begin_section: str
    end_section: str
    begin: int
    end: int

    @property
    def doc_id(self) -> str:
        # SEE: Snippet.getDocumentOnlyID: the last "/" part (Java's split drops trailing empties).
        parts = self.document.split("/")
        while len(parts) > 1 and not parts[-1]:
            parts.pop()
        return parts[-1]

    @property
    def size(self) -> int:
        # SEE: Snippet.getSize: both offsets count as inclusive, so a snippet has end-begin+1 chars.
        return self.end - self.begin + 1

    def overlaps(self, other: _Snippet) -> bool:
        # SEE: Snippet.itOverlaps: same sections, or (one way only) a "sections.0" snippet against
        # an "abstract" one; positions are never compared across other sections.
        comparable = (
            self.begin_section == other.begin_section and self.end_section == other.end_section
        ) or (self.begin_section == "0" and other.begin_section == "abstract")
        return comparable and not (self.begin > other.end or self.end < other.begin)

    def overlap(self, other: _Snippet) -> int:
        # SEE: Snippet.overlap: its four cases reduce to the inclusive intersection length.
        if not self.overlaps(other):
            return 0
        return min(self.end, other.end) - max(self.begin, other.begin) + 1


@dataclass
class _Answer:
    """SEE: data.ExactAnswer: a yes/no label, flat answers (BioASQ 1-2) or synonym lists."""

    label: str | None = None
    answers: list[str] = field(default_factory=list)
    lists: list[list[str]] = field(default_factory=list)

    def matches(self, response: list[str], *, remove: bool) -> bool:
        # SEE: ExactAnswer.containsAnswerSynonym: plain equality of lower-cased strings (no
        # trimming, no normalisation); with remove (list questions) the gold entry is consumed.
        for i, synonyms in enumerate(self.lists):
            if any(s == r for s in synonyms for r in response):
                if remove:
                    del self.lists[i]
                return True
        return False


@dataclass
class _Question:
    id: str | None
    type: str | None
    documents: list[str]
    snippets: list[_Snippet]
    answer: _Answer | None
    ideal: list[str]


def _section(name: Any) -> str:
    # SEE: Task1bData.readSnippets: a section loses everything up to its first "." ("sections.0"
    # becomes "0"; "abstract" and "title" stay).
    name = "" if name is None else str(name)
    return name[name.find(".") + 1 :]


def _parse_answer(value: Any, *, version: int, gold: bool, where: str) -> _Answer | None:
    if isinstance(value, str):
        # SEE: Task1bData.readData: lower-cased, "yes" if it contains "yes", else "no" if it
        # contains "no" (so "unknown" reads as "no"), else "none".
        low = value.lower()
        return _Answer(label="yes" if "yes" in low else "no" if "no" in low else "none")
    if not isinstance(value, list):
        return None  # NOTE: null is read as no answer (the Java stops on a null exact_answer).
    if not value:
        return _Answer()
    if isinstance(value[0], list):
        lists = []
        for item in value:
            if not isinstance(item, list):
                raise FormatError(f"{where}: exact_answer mixes lists and strings")
            names = [str(s).lower() for s in item]
            # SEE: Task1bData.readExactAnswerListOfArraysv2/v3: an empty entry is dropped; since
            # BioASQ 5 a submitted entry keeps only its first name (synonyms count in gold only).
            if names:
                lists.append(names if gold or version < 5 else names[:1])
        return _Answer(lists=lists)
    if version == 2:
        return _Answer(answers=[str(s).lower() for s in value])
    raise FormatError(f"{where}: exact_answer must be a list of lists (flat lists end in BioASQ 2)")


def _parse(data: Any, *, version: int, gold: bool) -> list[_Question]:
    """Read questions as Task1bData.readData does; unknown types and fields are kept as nothing."""
    role = "gold" if gold else "submission"
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise FormatError(f"{role}: expected an object with a 'questions' list")
    out = []
    for i, item in enumerate(data["questions"]):
        where = f"{role}: questions[{i}]"
        if not isinstance(item, dict):
            raise FormatError(f"{where}: not an object")
        try:
            snippets = [
                _Snippet(
                    canonical_url(str(s.get("document") or "")),
                    _section(s.get("beginSection")),
                    _section(s.get("endSection")),
                    int(s.get("offsetInBeginSection") or 0),
                    int(s.get("offsetInEndSection") or 0),
                )
                for s in item.get("snippets") or []
            ]
        except (AttributeError, TypeError, ValueError) as exc:
            raise FormatError(f"{where}: bad snippet ({exc})") from None
        ideal = item.get("ideal_answer")
        out.append(
            _Question(
                id=None if item.get("id") is None else str(item["id"]),
                type=item.get("type") if item.get("type") in _TYPES else None,
                # SEE: Task1bData.readDocuments: duplicates dropped; whole strings compared later.
                # NOTE: every PubMed URL form is first written one way (recent golden files mix
                # them); files in one form, as all of editions 7-11, score exactly as before.
                documents=list(
                    dict.fromkeys(canonical_url(str(d)) for d in item.get("documents") or [])
                ),
                snippets=snippets,
                answer=_parse_answer(
                    item.get("exact_answer"), version=version, gold=gold, where=where
                ),
                ideal=[ideal] if isinstance(ideal, str) else [str(t) for t in ideal or []],
            )
        )
    return out


def _pairs(gold: Any, submission: Any, version: int) -> list[tuple[_Question, _Question | None]]:
    submitted: dict[str, _Question] = {}
    for q in _parse(submission, version=version, gold=False):
        # SEE: Task1bData.getQuestion(String): the first submitted question with the id is used.
        if q.id is not None:
            submitted.setdefault(q.id, q)
    golds = _parse(gold, version=version, gold=True)
    return [(g, submitted.get(g.id) if g.id is not None else None) for g in golds]


# Phase A -------------------------------------------------------------------------------------


@dataclass
class _Scores:
    """SEE: data.CalculatedMeasures: every measure starts at 0 and is set only when defined."""

    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    ap: float = 0.0


def _ap_divisor(gold_size: int, version: int) -> float:
    # SEE: QuestionAnswerEvaluator.calculateAveragePrecision(Snippets): |gold| for BioASQ 2, 10 for
    # BioASQ 3-7, min(10, |gold|) since BioASQ 8. Submissions are never cut to 10 items, so more
    # than 10 relevant ones give an AP above 1.
    if version == 2:
        return float(gold_size)
    return 10.0 if version in (3, 5) else min(10.0, float(gold_size))


def _documents(gold: list[str], response: list[str], version: int) -> _Scores:
    s = _Scores()
    # SEE: QuestionAnswerEvaluator.calculatePRF: nothing submitted leaves every measure at 0.
    if response:
        tp = sum(1 for d in response if d in gold)
        fn = sum(1 for d in gold if d not in response)
        s.precision = tp / len(response)
        s.recall = tp / (tp + fn) if tp + fn else 0.0
        if s.precision and s.recall:
            s.f1 = 2 * s.precision * s.recall / (s.precision + s.recall)
    ap, hits = 0.0, 0
    for r, d in enumerate(response, 1):
        if d in gold:
            hits += 1
            ap += hits / r
    # SEE: calculateAveragePrecision: response.retainAll(gold) cuts the submission to its relevant
    # documents for every later use (EvaluatePhaseA scores each question twice).
    response[:] = [d for d in response if d in gold]
    s.ap = ap / _ap_divisor(len(gold), version) if response else 0.0
    return s


def _concatenate(snippets: list[_Snippet]) -> None:
    # SEE: QuestionAnswerEvaluator.concatenateSnippets: merges overlapping snippets of one document
    # and section in place; after a merge the inner loop restarts at index 1, not 0.
    i = 0
    while i < len(snippets):
        j = 0
        while j < len(snippets) and i < len(snippets):  # NOTE: the Java fails if i runs off.
            a, b = snippets[i], snippets[j]
            if (
                j != i
                and a.document == b.document
                and (a.begin_section, a.end_section) == (b.begin_section, b.end_section)
                and a.overlaps(b)
            ):
                span = min(a.begin, b.begin), max(a.end, b.end)
                snippets[i] = _Snippet(a.document, a.begin_section, a.end_section, *span)
                del snippets[j]
                j = 0
            j += 1
        i += 1


def _snippets(gold: list[_Snippet], response: list[_Snippet], version: int) -> _Scores:
    s = _Scores()
    _concatenate(gold)
    _concatenate(response)
    # SEE: calculatePRForSnippets: characters of each submitted snippet that overlap any gold
    # snippet of the same PMID (last URL part), over all submitted / all gold characters.
    if response:
        overlap = sum(r.overlap(g) for r in response for g in gold if r.doc_id == g.doc_id)
        size, gold_size = sum(r.size for r in response), sum(g.size for g in gold)
        s.precision = _div(overlap, size) if size else 0.0
        s.recall = _div(overlap, gold_size) if gold_size else 0.0
        if s.precision or s.recall:
            s.f1 = _div(2 * s.precision * s.recall, s.precision + s.recall)
    # SEE: calculateAveragePrecisionSnippets, precisionAtRSnippet: documents compared as whole
    # strings here; relevanceSnippet returns 1 when any gold snippet shares the document, whether
    # or not they overlap (the Java's `if (overlap != 0);` has a stray semicolon).
    ap, overlap, size = 0.0, 0, 0
    for r in response:
        size += r.size
        overlap += sum(r.overlap(g) for g in gold if r.document == g.document)
        relevant = any(r.document == g.document for g in gold)
        ap += _div(overlap, size) * (1.0 if relevant else 0.0)
    s.ap = _div(ap, _ap_divisor(len(gold), version))
    return s


def _score(gold: _Question, response: _Question, version: int) -> tuple[_Scores, _Scores]:
    # SEE: QuestionAnswerEvaluator.calculateMeasuresForPair (documents and snippets).
    return (
        _documents(gold.documents, response.documents, version),
        _snippets(gold.snippets, response.snippets, version),
    )


def evaluate_phase_a(gold: dict, submission: dict, *, edition: int = 11) -> dict[str, float]:
    """Score a Phase A submission's documents and snippets against a golden file.

    Raises:
        FormatError: when either file has a shape the official evaluator cannot read.
    """
    version = challenge_version(edition)
    pairs = [(g, r) for g, r in _pairs(gold, submission, version) if r is not None]
    # SEE: EvaluatorTask1b.EvaluatePhaseA: two passes, one kept for documents, one for snippets;
    # each scores everything again on the same objects, so the snippet pass sees snippets merged
    # twice. Unsubmitted questions are skipped; from BioASQ 9 on, so are those without gold.
    docs = [_score(g, r, version)[0] for g, r in pairs if not (version == 9 and not g.documents)]
    snips = [_score(g, r, version)[1] for g, r in pairs if not (version == 9 and not g.snippets)]
    n, m = len(docs), len(snips)
    snip_logs = _total(0.0 if math.isnan(s.ap) else _log(s.ap + EPSILON) for s in snips)
    return {
        "questions": len(pairs),
        "documents_questions": n,
        "snippets_questions": m,
        # SEE: MeanPrecisionArticles, MeanRecallArticles, MeanF1Articles, MapDocuments,
        # GMapDocuments: NaN counts as 0 (as log(epsilon) in GMAP); no questions gives 0 or NaN.
        "documents_precision": _total(_nz(s.precision) for s in docs) / n if n else 0.0,
        "documents_recall": _total(_nz(s.recall) for s in docs) / n if n else 0.0,
        "documents_f1": _div(_total(_nz(s.f1) for s in docs), n),
        "documents_map": _div(_total(_nz(s.ap) for s in docs), n),
        "documents_gmap": _exp(
            _div(
                _total(_log(EPSILON) if math.isnan(s.ap) else _log(s.ap + EPSILON) for s in docs),
                n,
            )
        ),
        # SEE: MeanPrecisionSnippets ... GMapSnippets: a NaN AP adds log 1 to GMAP, and a log sum
        # of exactly 0 (or NaN) reports 0.
        "snippets_precision": _div(_total(_nz(s.precision) for s in snips), m),
        "snippets_recall": _div(_total(_nz(s.recall) for s in snips), m),
        "snippets_f1": _div(_total(_nz(s.f1) for s in snips), m),
        "snippets_map": _div(_total(_nz(s.ap) for s in snips), m),
        "snippets_gmap": 0.0 if math.isnan(snip_logs) or snip_logs == 0 else _exp(snip_logs / m),
    }


# Phase B -------------------------------------------------------------------------------------


def _factoid(gold: _Answer, response: _Answer | None, version: int) -> tuple[float, float, float]:
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


def _listed(gold: _Answer, response: _Answer | None) -> tuple[float, float, float]:
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
    return _total(_nz(v) for v in values) / len(values) if values else 0.0


def evaluate_phase_b(gold: dict, submission: dict, *, edition: int = 11) -> dict[str, float | None]:
    """Score a Phase B submission's exact answers (and, approximately, ideal answers).

    Raises:
        FormatError: when either file has a shape the official evaluator cannot read.
    """
    version = challenge_version(edition)
    counts = dict.fromkeys(_TYPES, 0)
    yesno: list[tuple[bool, float]] = []
    factoid: list[tuple[float, float, float]] = []
    listed: list[tuple[float, float, float]] = []
    ideal: list[tuple[list[str], str]] = []
    for g, r in _pairs(gold, submission, version):
        if r is not None and g.ideal:
            ideal.append((g.ideal, " ".join(r.ideal)))
        answer = g.answer
        # SEE: EvaluatorTask1b.EvaluatePhaseB: from BioASQ 9 on, questions without a gold exact
        # answer are skipped. NOTE: unsubmitted questions are skipped in every edition (before
        # BioASQ 9 the Java stops with a NullPointerException on them).
        empty = answer is None or not (answer.label or answer.lists or answer.answers)
        if r is None or (version == 9 and empty):
            continue
        if g.type is None:
            continue
        counts[g.type] += 1
        answer = answer or _Answer()
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
        "questions": sum(counts.values()),
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
