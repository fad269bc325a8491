"""`quorum bioasq report`: a batch's scores by question type, with plots and a paired comparison.

A run is a submission written by `quorum bioasq run` and the journal beside it (confidence,
LLM calls, tokens and seconds per question). With the gold file each question is scored by the
official measures (infra/bioasq/measures/) one at a time, so per-question scores average to
the batch's — except yes/no macro F1, which exists only for a set and is reported for the set.
Two runs are compared on the questions both answered: an exact McNemar test on yes/no
correctness and a paired bootstrap on factoid MRR and list F1.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphs.bioasq.journal import journal_path
from graphs.describe import measure_text
from infra.bioasq.formats import FormatError
from infra.bioasq.measures import challenge_version, evaluate_phase_a, evaluate_phase_b
from infra.bioasq.measures.parsed import pairs
from infra.bioasq.types import ANSWERING_PHASES, QUESTION_TYPES, RETRIEVING_PHASES
from infra.files import check_target, write_atomic
from infra.stats import mcnemar

BOOTSTRAP_SAMPLES = 10_000
# The per-question measure each type is judged by, and the column it is shown in.
MEASURE = {
    "yesno": ("yesno_accuracy", "accuracy"),
    "factoid": ("factoid_mrr", "MRR"),
    "list": ("list_f1", "F1"),
}


@dataclass
class Run:
    """One batch: its submission, journal records, and per-question scores against the gold."""

    name: str
    submission: dict[str, Any]
    records: dict[str, dict[str, Any]]
    phase: str
    scores: dict[str, dict[str, float | None]] = field(default_factory=dict)
    totals: dict[str, Any] = field(default_factory=dict)
    guessed: set[str] = field(default_factory=set)
    """Yes/no questions whose submitted exact answer is bioasq.unanswered_yesno, not an answer."""


def find_submission(path: Path) -> Path:
    """Return the submission file of a run directory (the one with a journal), or the file."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise FormatError(f"{path}: no such run directory or submission file")
    found = [p for p in sorted(path.glob("*.json")) if journal_path(p).exists()]
    if len(found) != 1:
        raise FormatError(
            f"{path}: expected one submission with its journal (*.json + *.json.journal.jsonl), "
            f"found {len(found)}"
        )
    return found[0]


def load_run(path: Path) -> Run:
    """Read a run's submission and journal."""
    submission_path = find_submission(path)
    try:
        submission = json.loads(submission_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise FormatError(f"{submission_path}: not a readable submission ({exc})") from None
    records: dict[str, dict[str, Any]] = {}
    guessed: set[str] = set()
    phase = "A+"
    journal = journal_path(submission_path)
    if journal.exists():
        lines = journal.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if number == 0:
                phase = record.get("phase", phase)
                continue
            if not isinstance(record, dict) or not record.get("id"):
                continue
            if record.get("status") in ("ok", "insufficient"):
                # An insufficient-evidence answer is in the submission too: it is scored.
                records[record["id"]] = record
            if record.get("status") == "ok" or record.get("entry"):  # the latest entry decides
                (guessed.add if record.get("guessed") else guessed.discard)(record["id"])
    name = submission_path.parent.name if path.is_dir() else submission_path.stem
    return Run(name=name, submission=submission, records=records, phase=phase, guessed=guessed)


def score_run(run: Run, gold: dict[str, Any]) -> None:
    """Score every answered question alone, and the batch as a whole.

    Raises:
        FormatError: either file has a shape the official evaluator cannot read.
    """
    pairs(gold, run.submission, challenge_version(11))  # read as the evaluator reads them
    by_id = {q["id"]: q for q in gold["questions"] if q.get("id") is not None}
    answered = [q for q in run.submission["questions"] if q.get("id") in by_id]
    for question in answered:
        pair = ({"questions": [by_id[question["id"]]]}, {"questions": [question]})
        scores: dict[str, float | None] = {}
        if run.phase in RETRIEVING_PHASES:
            a = evaluate_phase_a(*pair)
            scores |= {"documents_ap": a.get("documents_map"), "snippets_ap": a.get("snippets_map")}
        if run.phase in ANSWERING_PHASES:
            b = evaluate_phase_b(*pair)
            qtype = by_id[question["id"]].get("type")
            if qtype in MEASURE:
                scores["score"] = b.get(MEASURE[qtype][0])
            if qtype == "factoid":
                scores["strict"] = b.get("factoid_strict_accuracy")
        run.scores[question["id"]] = scores
    subset = {"questions": [by_id[q["id"]] for q in answered]}
    answers = {"questions": answered}
    if run.phase in RETRIEVING_PHASES:
        run.totals |= evaluate_phase_a(subset, answers)
    if run.phase in ANSWERING_PHASES:
        run.totals |= evaluate_phase_b(subset, answers)


def _types(gold: dict[str, Any]) -> dict[str, str]:
    return {q["id"]: q.get("type", "") for q in gold.get("questions", [])}


def paired_bootstrap(first: list[float], second: list[float], *, seed: int = 0) -> dict:
    """Resample questions; return the mean difference, its 95% interval and a two-sided p."""
    x, y = np.asarray(first, float), np.asarray(second, float)
    if len(x) == 0:
        return {"difference": None, "low": None, "high": None, "p_value": None, "n": 0}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(BOOTSTRAP_SAMPLES, len(x)))
    diffs = (x[idx] - y[idx]).mean(axis=1)
    observed = float((x - y).mean())
    # Two-sided: how often the resampled difference falls on the other side of zero.
    p = 2 * min(float((diffs <= 0).mean()), float((diffs >= 0).mean()))
    return {
        "difference": round(observed, 4),
        "low": round(float(np.percentile(diffs, 2.5)), 4),
        "high": round(float(np.percentile(diffs, 97.5)), 4),
        "p_value": round(min(1.0, p), 4),
        "n": len(x),
    }


def compare(first: Run, second: Run, types: dict[str, str]) -> dict[str, Any]:
    """Paired comparison on the questions both runs answered."""
    shared = [q for q in first.scores if q in second.scores]
    out: dict[str, Any] = {"questions": len(shared)}
    yesno = [q for q in shared if types.get(q) == "yesno"]
    if yesno:
        # b: the questions only the first run got right; c: only the second.
        out["yesno_mcnemar"] = mcnemar(
            [bool(second.scores[q].get("score")) for q in yesno],
            [bool(first.scores[q].get("score")) for q in yesno],
            digits=4,
        )
    for qtype, key in (("factoid", "factoid_mrr"), ("list", "list_f1")):
        ids = [q for q in shared if types.get(q) == qtype]
        if ids:
            out[f"{key}_bootstrap"] = paired_bootstrap(
                [first.scores[q].get("score") or 0.0 for q in ids],
                [second.scores[q].get("score") or 0.0 for q in ids],
            )
    return out


def plots(run: Run, types: dict[str, str], directory: Path) -> list[Path]:
    """Draw score by type, confidence vs correctness, and latency/cost per question (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[Path] = []
    by_type: dict[str, list[float]] = {}
    for qid, scores in run.scores.items():
        if scores.get("score") is not None:
            by_type.setdefault(types.get(qid, "?"), []).append(float(scores["score"]))
    if by_type:
        fig, ax = plt.subplots(figsize=(5, 3.2))
        names = sorted(by_type)
        means = [float(np.mean(by_type[n])) for n in names]
        # An outline keeps a bar of 0 visible, and each bar says its value and its count.
        bars = ax.bar(
            [f"{n}\n(n={len(by_type[n])})" for n in names],
            means,
            color="#4477aa",
            edgecolor="#223355",
            linewidth=1.2,
            label="mean score per type",
        )
        ax.bar_label(bars, labels=[f"{m:.2f}" for m in means], padding=2, fontsize=8)
        ax.axhline(0, color="#223355", linewidth=1.2)
        ax.set_ylim(0, 1.1)
        ax.set_xlabel("question type (n = questions scored)")
        ax.set_ylabel("mean score")
        ax.legend(loc="upper right", fontsize=8)
        ax.set_title("Score by question type (yes/no acc., factoid MRR, list F1)", fontsize=9)
        made.append(_save(fig, directory / "score_by_type.png"))
    pairs = [
        (run.records[q]["confidence"], scores["score"])
        for q, scores in run.scores.items()
        if q in run.records
        and run.records[q].get("confidence") is not None
        and scores.get("score") is not None
    ]
    if pairs:
        fig, ax = plt.subplots(figsize=(5, 3.2))
        conf, score = zip(*pairs, strict=True)
        ax.scatter(conf, score, alpha=0.6, s=14, color="#aa3377", label="one question")
        ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel("synthesis confidence")
        ax.set_ylabel("score")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.05, 1.05)
        ax.set_title("Confidence vs correctness", fontsize=9)
        made.append(_save(fig, directory / "confidence_vs_score.png"))
    records = list(run.records.values())
    if records:
        fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
        left.hist(
            [r.get("seconds") or 0.0 for r in records], bins=20, color="#228833", label="seconds"
        )
        left.set_xlabel("seconds per question")
        right.hist(
            [r.get("tokens") or 0 for r in records], bins=20, color="#ccbb44", label="tokens"
        )
        right.set_xlabel("tokens per question")
        for axis in (left, right):
            axis.set_ylabel("questions")
            axis.legend(loc="upper right", fontsize=8)
        fig.suptitle("Latency and cost", fontsize=9)
        made.append(_save(fig, directory / "latency_cost.png"))
    return made


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    check_target(path, what="report file")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_fmt = measure_text


def _count(value: float) -> str:
    """Format a mean count: 7 as "7", 7.25 as "7.2" (never "7.0000")."""
    return f"{round(value):,}" if float(value).is_integer() else f"{value:,.1f}"


SUPPORT_COUNTS = {
    "given": "answers given",
    "verified": "verified by another model",
    "self_verified": "self-verified (judged only by their author)",
    "not_verified": "not verified",
    "unrecorded": "given before the journal recorded support",
    "refused": "refused (insufficient evidence)",
}
"""What `support_counts` counts, in the report's words."""


def support_counts(run: Run) -> dict[str, int]:
    """Count the run's answers by what their support check said (the journal's `support`).

    Given answers (status ok) by who verified them, and refused ones (an insufficient-evidence
    answer stands in the submission).
    """
    given = [r for r in run.records.values() if r.get("status") == "ok"]
    said = [(r.get("support") or {}).get("verified") for r in given]
    return {
        "given": len(given),
        "verified": said.count("supported"),
        "self_verified": said.count("self-verified"),
        "not_verified": said.count("not verified"),
        "unrecorded": sum(1 for r in given if "support" not in r),
        "refused": sum(1 for r in run.records.values() if r.get("status") == "insufficient"),
    }


def support_text(counts: dict[str, int]) -> str:
    """Return the support counts as one sentence."""
    parts = [
        f"{counts[key]} {SUPPORT_COUNTS[key]}"
        for key in ("verified", "self_verified", "not_verified", "unrecorded")
        if counts[key] or key != "unrecorded"
    ]
    return (
        f"Answers: {counts['given']} given ({', '.join(parts)}); "
        f"{counts['refused']} {SUPPORT_COUNTS['refused']}"
    )


def type_table(run: Run, types: dict[str, str]) -> list[list[str]]:
    """Rows per question type: questions, the type's measure, mean confidence, calls, tokens."""
    rows = []
    for qtype in QUESTION_TYPES:
        ids = [q for q in run.scores if types.get(q) == qtype]
        if not ids:
            continue
        scores = [run.scores[q].get("score") for q in ids if run.scores[q].get("score") is not None]
        recs = [run.records[q] for q in ids if q in run.records]
        conf = [r["confidence"] for r in recs if r.get("confidence") is not None]
        rows.append(
            [
                qtype,
                str(len(ids)),
                f"{MEASURE[qtype][1]} {_fmt(float(np.mean(scores)))}" if scores else "–",
                _fmt(float(np.mean(conf))) if conf else "–",
                _count(float(np.mean([r.get("llm_calls", 0) for r in recs]))) if recs else "–",
                _count(float(np.mean([r.get("tokens", 0) for r in recs]))) if recs else "–",
            ]
        )
    return rows


def write_report(
    run: Run, gold: dict[str, Any], directory: Path, other: Run | None = None
) -> dict[str, Any]:
    """Write report.md, report.html and the PNG plots into `directory`; return the figures."""
    directory.mkdir(parents=True, exist_ok=True)
    types = _types(gold)
    images = plots(run, types, directory)
    comparison = compare(run, other, types) if other is not None else None
    header = ["type", "questions", "score", "mean confidence", "LLM calls / q", "tokens / q"]
    rows = type_table(run, types)
    totals = {k: v for k, v in run.totals.items() if isinstance(v, int | float) or v is None}
    guessed = len(run.guessed & set(run.scores))
    said = f"Yes/no answers guessed (bioasq.unanswered_yesno, nothing supported): {guessed}"
    support = support_counts(run) if run.phase in ANSWERING_PHASES else None
    md = [f"# BioASQ run: {run.name} (phase {run.phase})", "", said, ""]
    if support is not None:
        md += [support_text(support), ""]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md += ["", "## Official measures, whole batch", "", "| measure | value |", "|---|---|"]
    md += [f"| {k} | {_fmt(v)} |" for k, v in sorted(totals.items())]
    if comparison is not None:
        md += ["", f"## {run.name} vs {other.name}", "", "```json"]
        md += [json.dumps(comparison, indent=2), "```"]
    md += [""] + [f"![{p.stem}]({p.name})" for p in images]
    write_atomic(directory / "report.md", "\n".join(md) + "\n")
    body = [f"<h1>BioASQ run: {html.escape(run.name)} (phase {html.escape(run.phase)})</h1>"]
    body.append(f"<p>{html.escape(said)}</p>")
    if support is not None:
        body.append(f"<p>{html.escape(support_text(support))}</p>")
    body.append(_html_table(header, rows))
    body.append("<h2>Official measures, whole batch</h2>")
    body.append(
        _html_table(["measure", "value"], [[k, _fmt(v)] for k, v in sorted(totals.items())])
    )
    if comparison is not None:
        body.append(f"<h2>{html.escape(run.name)} vs {html.escape(other.name)}</h2>")
        body.append(f"<pre>{html.escape(json.dumps(comparison, indent=2))}</pre>")
    body += [
        f'<p><img src="{html.escape(p.name)}" alt="{html.escape(p.stem)}"></p>' for p in images
    ]
    write_atomic(
        directory / "report.html",
        "<!doctype html><meta charset=utf-8><title>quorum BioASQ report</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
        "</style>\n" + "\n".join(body) + "\n",
    )
    return {
        "run": run.name,
        "phase": run.phase,
        "questions": len(run.scores),
        "guessed": guessed,
        "support": support,
        "totals": totals,
        "comparison": comparison,
        "files": ["report.md", "report.html", *(p.name for p in images)],
    }


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"
