"""`quorum eval organize`: context organization strategies compared on answer coverage and cost.

Each question's passages go through the organize node alone (no retrieval, no ensemble; CORG
answers its own groups, organize.corg_answers "organize"), then the group answers are scored
against the gold:
- d_f1: Disambig-F1, the CORG paper's primary measure (Stelmakh et al., 2022): per gold item,
  the token F1 of the answer a reader extracts from the response (normalised as votes compare
  answers: infra.bioasq.answers), averaged;
- answer_recall: per gold answer, the share of its tokens found in the group answers;
- entity_recall: the same for gold entities, where the data names them (else null);
- ear: per gold item, answer (× entity) recall within the best single group, counting only
  groups that hold one of the item's source passages when the data says which ones;
- counterfactual_split (ConflictQA): per planted counterfactual pair, both sides kept and in
  different groups (and, where relations were labelled, labelled counterfactual);
- duplicate_collapse (ConflictQA): per planted duplicate pair, exactly one of the two kept.

ConflictQA records are rebuilt into 4-passage cases: parametric_memory with its aligned
evidence (planted duplicates: same answer), counter_memory with its aligned evidence, and the
two sides each other's counterfactual. Passage ids and the shown order are those `eval methods`
gives the same record at its default seed (ids 8LLLLLSS: line, slot; the order shuffled by
seed 0 and the line), so no strategy gains from where a side's passages stand.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.runtime import Runtime
from tqdm import tqdm

from infra.bioasq.formats import FormatError, load_questions, pmid_of
from lab.trials.datasets import MethodCase
from lab.trials.organize_measures import (
    best_of,
    disambig_f1,
    organization_scores,
    token_recall,
)
from nodes.context import Context
from nodes.organize import organize

CONFLICTQA_FIELDS = (
    "parametric_memory",
    "parametric_memory_aligned_evidence",
    "counter_memory",
    "counter_memory_aligned_evidence",
)
"""A ConflictQA record's passages by slot: each memory, then its aligned evidence."""


@dataclass
class Case:
    """One question, its passages as contexts, and the gold items to recall."""

    question: str
    contexts: list[dict[str, Any]]
    items: list[dict[str, Any]] = field(default_factory=list)
    """Gold items: answer (a string or synonyms), entity (or None), sources (PMIDs or None)."""
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    """Planted counterfactual pairs (PMIDs)."""
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    """Planted duplicate pairs (PMIDs)."""
    qtype: str = "summary"
    """The question type organize answers for (ConflictQA's answers are statements)."""
    snippets: int = 0
    """Gold snippets behind the contexts (BioASQ), for --min-snippets."""


def without_counterfactual(case: MethodCase) -> MethodCase:
    """Return the case without its planted counterfactual passages and their duplicates.

    What is left holds one side (the gold and its duplicate) in the same order: the control
    a method that answers a conflict plurally must answer once and surely.
    """
    out = {p.pmid for p in case.passages if p.role == "counterfactual"}
    kept = tuple(p for p in case.passages if p.pmid not in out and p.of not in out)
    return dataclasses.replace(case, passages=kept)


def load_cases(path: Path) -> list[Case]:
    """Read ConflictQA (.jsonl) or BioASQ list/factoid questions with gold snippets (.json)."""
    if path.suffix == ".jsonl":
        cases = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                cases.append(_conflictqa_case(number, json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
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
            items.append({"answer": synonyms, "entity": None, "sources": None})
        contexts = [_doc(p, " ".join(t)) for p, t in texts.items()]
        cases.append(Case(q.body, contexts, items, qtype=q.type, snippets=len(q.snippets)))
    return cases


def _conflictqa_case(line: int, row: dict[str, Any]) -> Case:
    ids = [f"8{line:05d}{slot:02d}" for slot in range(4)]
    texts = [" ".join(row[name].split()) for name in CONFLICTQA_FIELDS]
    memory, counter = (ids[0], ids[1]), (ids[2], ids[3])
    order = list(range(4))
    random.Random(f"0:conflictqa:{line}").shuffle(order)
    return Case(
        question=row["question"],
        contexts=[_doc(ids[slot], texts[slot]) for slot in order],
        items=[
            {"answer": row["memory_answer"], "entity": None, "sources": list(memory)},
            {"answer": row["counter_answer"], "entity": None, "sources": list(counter)},
        ],
        conflicts=[(a, b) for a in memory for b in counter],
        duplicates=[memory, counter],
    )


def _doc(pmid: str, text: str) -> dict[str, Any]:
    return {"pmid": pmid, "title": "", "abstract": text, "score": 0.0}


def score_case(case: Case, update: dict[str, Any]) -> dict[str, Any]:
    """Score one organize update against the case's gold."""
    groups = update.get("groups") or [
        {"pmids": [c["pmid"] for c in update.get("organized", [])], "answer": "", "cited": []}
    ]
    everything = " ".join(g.get("answer", "") for g in groups)
    answer_recall = [best_of(item["answer"], everything) for item in case.items]
    entities = [token_recall(item["entity"], everything) for item in case.items if item["entity"]]
    ear = []
    for item in case.items:
        sources = item.get("sources")
        holders = [g for g in groups if sources is None or set(sources) & set(g["pmids"])]
        ear.append(
            max(
                (
                    best_of(item["answer"], g.get("answer", ""))
                    * (token_recall(item["entity"], g["answer"]) if item["entity"] else 1.0)
                    for g in holders
                ),
                default=0.0,
            )
        )
    result = {
        "d_f1": disambig_f1(case.items, everything),
        "answer_recall": float(np.mean(answer_recall)),
        "entity_recall": float(np.mean(entities)) if entities else None,
        "ear": float(np.mean(ear)),
    }
    result |= organization_scores(
        [g["pmids"] for g in groups], case.conflicts, case.duplicates, update.get("relations")
    )
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
    # The node runs alone and its group answers are scored: CORG answers them itself, as the
    # paper's aggregator does (one call per group) and as its baselines answer theirs.
    ctx = _with_organize(ctx, corg_answers="organize")
    corg = _with_organize(ctx, strategy="corg")
    rows = []
    for case in tqdm(cases, unit=" q", file=sys.stderr, dynamic_ncols=True, disable=None):
        state = {"question": case.question, "qtype": case.qtype, "contexts": case.contexts}
        run = ctx
        if match_corg and strategy in ("random", "kmeans"):
            reference = await organize(state, Runtime(context=corg))
            run = _with_organize(ctx, groups=max(1, len(reference.get("groups") or [])))
        rows.append(score_case(case, await organize(state, Runtime(context=run))))
    report: dict[str, Any] = {"questions": len(rows), "strategy": strategy}
    for key in (
        "d_f1",
        "answer_recall",
        "entity_recall",
        "ear",
        "counterfactual_split",
        "duplicate_collapse",
    ):
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
