"""How organize's groups are scored: D-F1, token recall, planted pairs, the confidence gate.

The measures of `quorum eval organize` (lab/trials/organize.py, which reads the cases and runs
the node) and of `eval methods`' CORG rows (lab/trials/method_rows.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from infra.bioasq.answers import normalize_answer


def tokens(text: str) -> list[str]:
    """Return lower-cased word tokens."""
    return re.findall(r"\w+", text.lower())


def token_recall(gold: str, text: str) -> float:
    """Return the share of gold's tokens that appear in text."""
    wanted = tokens(gold)
    have = set(tokens(text))
    return sum(t in have for t in wanted) / len(wanted) if wanted else 0.0


def span_f1(gold: str, response: str) -> float:
    """Return the token F1 of the response's span a perfect extractive reader returns for gold.

    D-F1 reads each answer with a RoBERTa reader trained on SQuAD 2.0, asked the item's
    disambiguated sub-question. Neither is here: no reader's weights can be loaded (no model
    hub; no package ships one) and ConflictQA has no sub-questions (the paper had GPT-4 write
    them). So the reader is taken to extract the span that best matches the gold: an upper
    bound of any extractive reader, which still scores an answer lost in a long mixed response
    below one stated on its own only through F1's precision within the span.
    """
    gold_tokens = normalize_answer(gold).split()
    words = normalize_answer(response).split()
    wanted = Counter(gold_tokens)
    # The best span starts and ends on gold tokens: trimming any other end only raises F1.
    hits = [k for k, w in enumerate(words) if w in wanted]
    best = 0.0
    for x, start in enumerate(hits):
        seen: Counter[str] = Counter()
        overlap = 0
        for end in hits[x:]:
            seen[words[end]] += 1
            overlap += seen[words[end]] <= wanted[words[end]]
            best = max(best, 2 * overlap / (end - start + 1 + len(gold_tokens)))
    return best


def disambig_f1(items: list[dict[str, Any]], response: str) -> float:
    """Return D-F1: per gold item its best synonym's span F1 in the response, averaged."""
    if not items:
        return 0.0
    return float(np.mean([best_of(item["answer"], response, span_f1) for item in items]))


def organization_scores(
    groups: list[list[str]],
    conflicts: list[tuple[str, str]],
    duplicates: list[tuple[str, str]],
    relations: list[dict[str, Any]] | None = None,
) -> dict[str, float | None]:
    """Return the share of planted pairs that groups handled (`pair_outcomes`' means).

    None where nothing of the kind was planted.
    """
    split, collapsed = pair_outcomes(groups, conflicts, duplicates, relations)
    return {
        "counterfactual_split": float(np.mean(split)) if split else None,
        "duplicate_collapse": float(np.mean(collapsed)) if collapsed else None,
    }


def pair_outcomes(
    groups: Sequence[Sequence[str]],
    conflicts: list[tuple[str, str]],
    duplicates: list[tuple[str, str]],
    relations: list[dict[str, Any]] | None = None,
) -> tuple[list[bool], list[bool]]:
    """Tell, pair by pair, whether groups split planted counterfactuals and collapsed duplicates.

    A counterfactual pair is split when each side (the passage or a planted duplicate of it)
    is kept in some group and no group holds both sides; where relations were labelled, the
    pair must also be labelled counterfactual. A duplicate pair is collapsed when exactly one
    of the two is kept.

    Args:
        groups: The PMIDs of each group.
        conflicts: Planted counterfactual pairs.
        duplicates: Planted duplicate pairs.
        relations: organize's labelled pairs (a, b, label), if it labelled any.
    """
    side: dict[str, str] = {}

    def root(pmid: str) -> str:
        while side.get(pmid, pmid) != pmid:
            pmid = side[pmid]
        return pmid

    for a, b in duplicates:
        side[max(root(a), root(b))] = min(root(a), root(b))
    held = [{root(p) for p in g} for g in groups]
    kept = {p for g in groups for p in g}
    labels = {frozenset((r["a"], r["b"])): r["label"] for r in relations or []}
    split = []
    for a, b in conflicts:
        ra, rb = root(a), root(b)
        apart = (
            any(ra in h for h in held)
            and any(rb in h for h in held)
            and not any({ra, rb} <= h for h in held)
        )
        if labels:
            apart = apart and labels.get(frozenset((a, b))) == "counterfactual"
        split.append(apart)
    collapsed = [(a in kept) != (b in kept) for a, b in duplicates]
    return split, collapsed


GATE = 0.5
"""The confidence at or above which an answer counts as sure (synthesis's min_confidence)."""


def _confidence(state: dict[str, Any]) -> float | None:
    """Return the final answer's confidence, else the decision's share; None with neither."""
    for record in (state.get("answer"), state.get("result")):
        if record and record.get("confidence") is not None:
            return float(record["confidence"])
    decision = state.get("decision") or {}
    return float(decision["share"]) if "share" in decision else None


def answered_plurally_or_below_gate(state: dict[str, Any], gate: float = GATE) -> bool:
    """Tell whether a case's final state kept its answers apart or claimed none surely.

    True when the decision is plural (CORG's groups conflict) or the final answer's confidence
    (else the decision's share) is below the gate; a state with neither counts as unsure.
    """
    if (state.get("decision") or {}).get("plural"):
        return True
    confidence = _confidence(state)
    return confidence is None or confidence < gate


def answered_confidently(state: dict[str, Any], gate: float = GATE) -> bool:
    """Tell whether a case's final state gave one answer at a confidence at or above the gate."""
    answer = state.get("answer") or state.get("result") or {}
    given = answer.get("exact") or answer.get("exact_answer") or answer.get("ideal")
    return bool(given) and not answered_plurally_or_below_gate(state, gate)


def best_of(answer: str | list[str], text: str, measure=token_recall) -> float:
    """Return the best `measure` of any synonym of `answer` in `text`."""
    options = answer if isinstance(answer, list) else [answer]
    return max(measure(a, text) for a in options)
