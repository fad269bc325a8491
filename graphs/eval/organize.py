"""`quorum eval organize`: context organization strategies compared on answer coverage and cost.

Each question's passages go through the organize node alone (no retrieval, no ensemble), then
the group answers are scored by token recall against the gold:
- answer_recall: per gold answer, the share of its tokens found in the group answers;
- entity_recall: the same for gold entities, where the data names them (else null);
- ear: per gold item, answer (× entity) recall within the best single group, counting only
  groups that hold the item's source passage when the data says which passage supports it;
- counterfactual_split (ConflictQA): the supporting and the counter-evidence passage ended in
  different groups (and, for corg, were labelled counterfactual).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.runtime import Runtime
from tqdm import tqdm

from infra.bioasq.formats import FormatError, load_questions, pmid_of
from nodes.context import Context
from nodes.organize import organize


@dataclass
class Case:
    """One question, its passages as contexts, and the gold items to recall."""

    question: str
    contexts: list[dict[str, Any]]
    items: list[dict[str, Any]] = field(default_factory=list)
    conflict: tuple[str, str] | None = None
    snippets: int = 0
    """Gold snippets behind the contexts (BioASQ), for --min-snippets."""


def tokens(text: str) -> list[str]:
    """Return lower-cased word tokens."""
    return re.findall(r"\w+", text.lower())


def token_recall(gold: str, text: str) -> float:
    """Return the share of gold's tokens that appear in text."""
    wanted = tokens(gold)
    have = set(tokens(text))
    return sum(t in have for t in wanted) / len(wanted) if wanted else 0.0


def load_cases(path: Path) -> list[Case]:
    """Read ConflictQA (.jsonl) or BioASQ list/factoid questions with gold snippets (.json)."""
    if path.suffix == ".jsonl":
        cases = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                support, counter = (
                    row["parametric_memory_aligned_evidence"],
                    row["counter_memory_aligned_evidence"],
                )
                cases.append(
                    Case(
                        question=row["question"],
                        contexts=[_doc("1", support), _doc("2", counter)],
                        items=[
                            {"answer": row["memory_answer"], "entity": None, "source": "1"},
                            {"answer": row["counter_answer"], "entity": None, "source": "2"},
                        ],
                        conflict=("1", "2"),
                    )
                )
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise FormatError(f"{path}:{number}: not a ConflictQA record ({exc})") from None
        return cases
    cases = []
    for q in load_questions(path):
        if q.type not in ("list", "factoid") or not q.snippets or not q.exact_answer:
            continue
        texts: dict[str, list[str]] = {}
        for snippet in q.snippets:
            texts.setdefault(pmid_of(snippet["document"]), []).append(snippet.get("text", ""))
        gold = q.exact_answer if isinstance(q.exact_answer, list) else [q.exact_answer]
        items = []
        for item in gold:
            synonyms = item if isinstance(item, list) else [item]
            items.append({"answer": synonyms, "entity": None, "source": None})
        contexts = [_doc(p, " ".join(t)) for p, t in texts.items()]
        cases.append(Case(q.body, contexts, items, snippets=len(q.snippets)))
    return cases


def _doc(pmid: str, text: str) -> dict[str, Any]:
    return {"pmid": pmid, "title": "", "abstract": text, "score": 0.0}


def _best(answer: str | list[str], text: str) -> float:
    options = answer if isinstance(answer, list) else [answer]
    return max(token_recall(a, text) for a in options)


def score_case(case: Case, update: dict[str, Any]) -> dict[str, Any]:
    """Score one organize update against the case's gold."""
    groups = update.get("groups") or [
        {"pmids": [c["pmid"] for c in update.get("organized", [])], "answer": "", "cited": []}
    ]
    everything = " ".join(g.get("answer", "") for g in groups)
    answer_recall = [_best(item["answer"], everything) for item in case.items]
    entities = [token_recall(item["entity"], everything) for item in case.items if item["entity"]]
    ear = []
    for item in case.items:
        holders = [g for g in groups if item["source"] is None or item["source"] in g["pmids"]]
        ear.append(
            max(
                (
                    _best(item["answer"], g.get("answer", ""))
                    * (token_recall(item["entity"], g["answer"]) if item["entity"] else 1.0)
                    for g in holders
                ),
                default=0.0,
            )
        )
    result = {
        "answer_recall": float(np.mean(answer_recall)),
        "entity_recall": float(np.mean(entities)) if entities else None,
        "ear": float(np.mean(ear)),
    }
    if case.conflict:
        a, b = case.conflict
        apart = not any(a in g["pmids"] and b in g["pmids"] for g in groups)
        labels = {(r["a"], r["b"]): r["label"] for r in update.get("relations", [])}
        if labels:
            apart = apart and labels.get((a, b)) == "counterfactual"
        result["counterfactual_split"] = float(apart)
    calls = update.get("calls", [])
    graph = update.get("relation_graph") or {}
    n = len(case.contexts)
    result |= {
        "groups": len(groups),
        "relation_calls": graph.get("calls", 0),
        # Every pair of the question's contexts, before the top-k cap: the cap is a saving too.
        "naive_relation_calls": n * (n - 1) // 2,
        "output_tokens": sum(c.get("output_tokens", 0) for c in calls),
        "input_tokens": sum(c.get("input_tokens", 0) for c in calls),
    }
    return result


def _with_organize(ctx: Context, **changes: Any) -> Context:
    settings = ctx.settings.model_copy(
        update={"organize": ctx.settings.organize.model_copy(update=changes)}
    )
    return dataclasses.replace(ctx, settings=settings)


async def evaluate_organize(
    ctx: Context, cases: list[Case], *, match_corg: bool = False
) -> dict[str, Any]:
    """Run the organize node on every case and average the scores.

    Args:
        ctx: Runtime context; its organize settings pick the strategy.
        cases: Questions with their contexts and gold.
        match_corg: For 'random' and 'kmeans', first organize each question with CORG and
            use its group count, so the ablation differs from CORG only in how it groups.
    """
    strategy = ctx.settings.organize.strategy
    corg = _with_organize(ctx, strategy="corg")
    rows = []
    for case in tqdm(cases, unit=" q", file=sys.stderr, dynamic_ncols=True, disable=None):
        state = {"question": case.question, "contexts": case.contexts}
        run = ctx
        if match_corg and strategy in ("random", "kmeans"):
            reference = await organize(state, Runtime(context=corg))
            run = _with_organize(ctx, groups=max(1, len(reference.get("groups") or [])))
        rows.append(score_case(case, await organize(state, Runtime(context=run))))
    report: dict[str, Any] = {"questions": len(rows), "strategy": strategy}
    for key in ("answer_recall", "entity_recall", "ear", "counterfactual_split"):
        values = [r[key] for r in rows if r.get(key) is not None]
        report[key] = round(float(np.mean(values)), 4) if values else None
    for key in (
        "relation_calls",
        "naive_relation_calls",
        "output_tokens",
        "input_tokens",
        "groups",
    ):
        report[key] = round(float(np.mean([r[key] for r in rows])), 2) if rows else 0
    naive = sum(r["naive_relation_calls"] for r in rows)
    # Pooled over questions (Σ calls / Σ pairs), and the mean of per-question ratios.
    report["relation_call_ratio"] = (
        round(sum(r["relation_calls"] for r in rows) / naive, 4) if naive else None
    )
    ratios = [
        r["relation_calls"] / r["naive_relation_calls"] for r in rows if r["naive_relation_calls"]
    ]
    report["relation_call_ratio_mean"] = round(float(np.mean(ratios)), 4) if ratios else None
    return report
