"""`quorum eval ensemble`: ensemble strategies compared on the same contexts, against permute_vote.

Each question's contexts go to the ensemble node alone (no retrieval, organize or synthesis),
once per strategy, and the first answer of the strategy's decision is scored:
- NaturalQuestions-open (.jsonl or .jsonl.gz with question, answers, ctxs): the gold passage at a
  seeded position among hard distractors, the top BM25 hits for the question among the other
  questions' gold passages that name no gold answer (whole words, case-insensitive); exact
  match, substring EM (a gold answer inside the prediction) and token F1, SQuAD-normalized, the
  best over gold answers.
- BioASQ golden .json: yes/no questions, gold snippets grouped per document; accuracy.
Per strategy also: LLM calls and tokens per question, vote agreement, distinct answers, how
concentrated the members' wrong answers are, how often members cite the gold passage, and an
exact McNemar test of per-question correctness against permute_vote, which always runs.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.runtime import Runtime
from tqdm import tqdm

from infra.bioasq.formats import FormatError, load_questions, pmid_of
from infra.search.embedded import EmbeddedIndex
from infra.search.keywords import keyword_query
from infra.search.query import QueryError
from infra.settings import Settings
from infra.stats import mcnemar
from lab.trials.answers import (
    exact_match,
    normalize,
    substring_match,
    token_f1,
    wrong_concentration,
)
from nodes.context import Context
from nodes.ensemble import StrategyUnavailable, ensemble
from nodes.records import call_tokens

REFERENCE = "permute_vote"
# BM25 hits looked at per question: answer-bearing and duplicate passages are skipped.
SEARCH_DEPTH = 200
METRICS = (
    "exact_match",
    "substring_em",
    "f1",
    "accuracy",
    "llm_calls",
    "tokens",
    "agreement",
    "distinct",
    "wrong_concentration",
    "gold_citation",
    "citation_agreement",
    "failed_members",
)


@dataclass
class Case:
    """One question, the contexts every strategy sees, and its gold answers."""

    question: str
    qtype: str
    contexts: list[dict[str, Any]]
    gold: list[str]
    gold_pmid: str | None = None
    """Id of the one passage that holds the answer (NaturalQuestions), else None."""


@dataclass
class _Passage:
    id: str
    question: str
    answers: list[str]
    title: str
    text: str
    words: str = field(init=False)
    """Title and text normalized, space-padded, for whole-word answer matching."""

    def __post_init__(self) -> None:
        self.words = f" {normalize(f'{self.title} {self.text}')} "


def load_cases(
    path: Path, *, distractors: int = 9, limit: int | None = None, seed: int = 0
) -> list[Case]:
    """Read NaturalQuestions-open (.jsonl, .jsonl.gz) or BioASQ yes/no questions (.json).

    Args:
        path: The dataset file.
        distractors: NaturalQuestions: BM25 distractors shown with each gold passage.
        limit: Only the first N questions (distractors still come from the whole file).
        seed: Seeds the gold passage's position among the distractors.
    """
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return _nq_cases(_read_nq(path), distractors, limit, seed)
    if path.suffix != ".json":
        raise FormatError(
            f"{path}: expected NaturalQuestions-open .jsonl(.gz) or a BioASQ golden .json"
        )
    cases = []
    for q in load_questions(path):
        gold = q.exact_answer.strip().lower() if isinstance(q.exact_answer, str) else None
        if q.type != "yesno" or gold not in ("yes", "no") or not q.snippets:
            continue
        texts: dict[str, list[str]] = {}
        try:
            for snippet in q.snippets:
                texts.setdefault(pmid_of(snippet["document"]), []).append(snippet.get("text", ""))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FormatError(
                f"{path}: question {q.id}: a snippet without a document ({exc})"
            ) from None
        contexts = [
            {"pmid": p, "title": "", "abstract": " ".join(t), "score": 0.0}
            for p, t in texts.items()
        ]
        cases.append(Case(q.body, "yesno", contexts, [gold]))
    return cases[:limit]


def _read_nq(path: Path) -> list[_Passage]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: cannot read ({exc})") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(_nq_row(str(number), json.loads(line)))
        except KeyError as exc:
            raise FormatError(
                f"{path}:{number}: not a NaturalQuestions-open record (missing {exc})"
            ) from None
        except (ValueError, TypeError, AttributeError) as exc:
            raise FormatError(
                f"{path}:{number}: not a NaturalQuestions-open record ({exc})"
            ) from None
    if not rows:
        raise FormatError(f"{path}: no questions")
    return rows


def _nq_row(id_: str, row: Any) -> _Passage:
    question, answers, ctxs = row["question"], row["answers"], row["ctxs"]
    if not isinstance(question, str) or not question.strip():
        raise ValueError("'question' is not a non-empty string")
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ValueError("'answers' is not a list of strings")
    answers = [a.strip() for a in answers if a.strip()]
    if not answers:
        raise ValueError("no gold answer")
    if not isinstance(ctxs, list) or not ctxs:
        raise ValueError("'ctxs' is empty")
    gold = next((c for c in ctxs if c.get("isgold")), ctxs[0])
    if not isinstance(gold.get("text"), str):
        raise ValueError("the gold passage has no 'text'")
    return _Passage(id_, question.strip(), answers, str(gold.get("title") or ""), gold["text"])


def _nq_cases(rows: list[_Passage], distractors: int, limit: int | None, seed: int) -> list[Case]:
    by_id = {r.id: r for r in rows}
    docs = [{"pmid": r.id, "title": r.title, "abstract": r.text} for r in rows]
    with tempfile.TemporaryDirectory(prefix="quorum-nq-") as tmp:
        index = EmbeddedIndex.build(Path(tmp) / "index", docs)
        return [_nq_case(index, by_id, row, distractors, seed) for row in rows[:limit]]


def _nq_case(
    index: EmbeddedIndex, by_id: dict[str, _Passage], row: _Passage, distractors: int, seed: int
) -> Case:
    try:
        hits = index.search(keyword_query(row.question), SEARCH_DEPTH).hits
    except QueryError:
        hits = []
    scores = dict(hits)
    # Whole words after normalization: a one-letter answer ("S") must not exclude everything.
    answers = [f" {a} " for a in map(normalize, row.answers) if a]
    picked: list[_Passage] = []
    seen = {row.text}
    for pmid, _ in hits:
        if len(picked) == distractors:
            break
        other = by_id[pmid]
        if other.text in seen or any(a in other.words for a in answers):
            continue
        seen.add(other.text)
        picked.append(other)
    contexts = [_doc(p, scores[p.id]) for p in picked]
    position = random.Random(f"{seed}:{row.id}").randint(0, len(contexts))
    contexts.insert(position, _doc(row, scores.get(row.id, 0.0)))
    return Case(row.question, "factoid", contexts, row.answers, gold_pmid=row.id)


def _doc(passage: _Passage, score: float) -> dict[str, Any]:
    return {
        "pmid": passage.id,
        "title": passage.title,
        "abstract": passage.text,
        "score": round(float(score), 4),
    }


def correct(case: Case, prediction: str) -> bool:
    """Tell whether an answer is right: yes/no equal, else a gold answer inside it."""
    if case.qtype == "yesno":
        return normalize(prediction) == case.gold[0]
    return bool(substring_match(prediction, case.gold))


def score_case(case: Case, update: dict[str, Any]) -> dict[str, Any]:
    """Score one ensemble update against the case's gold."""
    votes = update.get("votes") or {}
    # The strategy's decision is what the graph answers (synthesis.mode "vote" makes it final).
    answers = (update.get("decision") or {}).get("answers") or []
    top = answers[0]["answer"] if answers else ""
    prediction = top if isinstance(top, str) else ", ".join(top)
    members = update.get("members") or []
    ok = [m for m in members if m.get("error") is None]
    answered = [m["answer"][0] for m in ok if m.get("answer")]
    calls = update.get("calls") or []
    yesno = case.qtype == "yesno"
    row = {
        "correct": correct(case, prediction),
        "exact_match": None if yesno else exact_match(prediction, case.gold),
        "substring_em": None if yesno else substring_match(prediction, case.gold),
        "f1": None if yesno else token_f1(prediction, case.gold),
        "accuracy": float(correct(case, prediction)) if yesno else None,
        "llm_calls": len(calls),
        "tokens": sum(call_tokens(c) for c in calls),
        "agreement": votes.get("agreement"),
        "distinct": votes.get("distinct"),
        "wrong_concentration": wrong_concentration(answered, [correct(case, a) for a in answered]),
        "gold_citation": (
            sum(case.gold_pmid in (m.get("pmids") or []) for m in ok) / len(ok)
            if case.gold_pmid and ok
            else None
        ),
        "citation_agreement": votes.get("citation_agreement"),
        "failed_members": len(members) - len(ok),
    }
    return row


def with_models(settings: Settings, n: int) -> Settings:
    """Return settings whose ensemble model list is repeated or cut to n entries."""
    specs = settings.models.ensemble
    chosen = [specs[i % len(specs)] for i in range(n)]
    return settings.model_copy(
        update={"models": settings.models.model_copy(update={"ensemble": chosen})}
    )


def _with_ensemble(ctx: Context, **changes: Any) -> Context:
    settings = ctx.settings.model_copy(
        update={"ensemble": ctx.settings.ensemble.model_copy(update=changes)}
    )
    return dataclasses.replace(ctx, settings=settings)


async def _run(ctx: Context, cases: list[Case], name: str) -> list[dict[str, Any]]:
    rows = []
    bar = tqdm(cases, desc=name, unit=" q", file=sys.stderr, dynamic_ncols=True, disable=None)
    for case in bar:
        state = {"question": case.question, "qtype": case.qtype, "organized": case.contexts}
        rows.append(score_case(case, await ensemble(state, Runtime(context=ctx))))
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for key in METRICS:
        values = [r[key] for r in rows if r[key] is not None]
        summary[key] = round(float(np.mean(values)), 4) if values else None
    return summary


async def evaluate_ensemble(
    ctx: Context, cases: list[Case], strategies: list[str], *, dataset: str = ""
) -> dict[str, Any]:
    """Run the ensemble node with each strategy on every case; compare each to permute_vote.

    Every view may show all of a question's contexts (ensemble.contexts is raised to the
    largest context count), so no strategy loses the gold passage to a cut it did not choose.
    A strategy the endpoint cannot run (StrategyUnavailable) is reported as unavailable.
    """
    names = list(dict.fromkeys([*strategies, REFERENCE]))
    shown = max((len(c.contexts) for c in cases), default=1)
    # CoBag draws its views (cobag.contexts each) from all of them: its pool is the case.
    cobag = ctx.settings.ensemble.cobag.model_copy(update={"pool": shown})
    rows: dict[str, list[dict[str, Any]]] = {}
    unavailable: dict[str, str] = {}
    for name in names:
        chosen = _with_ensemble(ctx, strategy=name, contexts=shown, cobag=cobag)
        try:
            rows[name] = await _run(chosen, cases, name)
        except StrategyUnavailable as exc:
            unavailable[name] = str(exc) or "strategy unavailable"
    reference = [r["correct"] for r in rows.get(REFERENCE, [])]
    results: dict[str, Any] = {}
    for name in names:
        if name in unavailable:
            results[name] = {"unavailable": unavailable[name]}
            continue
        results[name] = _summary(rows[name])
        compare = name != REFERENCE and REFERENCE in rows
        results[name]["mcnemar"] = (
            mcnemar(reference, [r["correct"] for r in rows[name]]) if compare else None
        )
    yesno = bool(cases) and cases[0].qtype == "yesno"
    return {
        "dataset": dataset,
        "questions": len(cases),
        "contexts": shown,
        "correct_by": "accuracy" if yesno else "substring_em",
        "reference": REFERENCE,
        "strategies": results,
    }


def table(report: dict[str, Any]) -> list[str]:
    """Return the report as the lines of a compact text table."""
    columns = [
        ("EM", "exact_match"),
        ("subEM", "substring_em"),
        ("F1", "f1"),
        ("acc", "accuracy"),
        ("calls/q", "llm_calls"),
        ("tok/q", "tokens"),
        ("agree", "agreement"),
        ("distinct", "distinct"),
        ("wrongconc", "wrong_concentration"),
        ("goldcite", "gold_citation"),
    ]
    lines = [
        f"{report['dataset']}: {report['questions']} questions, {report['contexts']} contexts; "
        f"correct by {report['correct_by']}; McNemar b/c vs {report['reference']}",
        f"{'strategy':<17}" + "".join(f"{h:>10}" for h, _ in columns) + f"{'b/c':>9}{'p':>8}",
    ]
    for name, result in report["strategies"].items():
        if "unavailable" in result:
            lines.append(f"{name:<17}unavailable: {result['unavailable']}")
            continue
        cells = "".join(f"{_cell(result[key]):>10}" for _, key in columns)
        test = result["mcnemar"]
        paired = f"{test['b']}/{test['c']}" if test else "—"
        p = f"{test['p_value']:.3f}" if test else "—"
        lines.append(f"{name:<17}{cells}{paired:>9}{p:>8}")
    return lines


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3f}"
