"""Citation-Consistent Voting (CCV): vote on the documents answers cite, not on strings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.bioasq import normalize_answer
from infra.models import ChatModel
from nodes.context import Context
from nodes.ensemble.strategies.registry import Plan, Strategy, every_model, register
from nodes.ensemble.views import permuted_views


@dataclass(frozen=True)
class CitedAnswer:
    """One member's answer with the passage it cited, as the member saw its view."""

    answer: str
    """The member's normalized answer key ("" = no answer)."""
    index: int | None
    """1-based passage number the member cited, as shown in its view."""
    quote: str | None
    """Supporting quote the member gave."""
    order: tuple[str, ...]
    """PMIDs of the member's view, in the order shown."""


def _collapse(text: str) -> str:
    return " ".join(text.split()).lower()


def _cited_pmid(member: CitedAnswer) -> str | None:
    index = member.index
    if index is None or not 1 <= index <= len(member.order):
        return None
    return member.order[index - 1]


def _is_valid(
    member: CitedAnswer, pmid: str | None, texts: Mapping[str, str], strict: bool
) -> bool:
    if not member.answer or pmid is None:
        return False
    if not strict:
        return True
    quote = _collapse(member.quote or "")
    return (
        bool(quote)
        and quote in _collapse(texts.get(pmid, ""))
        and _collapse(member.answer) in quote
    )


def ccv_select(
    members: Sequence[CitedAnswer], texts: Mapping[str, str], *, strict: bool = False
) -> dict[str, Any]:
    """Pick the answer whose members agree on one cited document, not merely on the answer.

    A member is valid when it answers and its 1-based index falls in its view; in strict mode
    its quote must also occur in the cited document (case-insensitive, whitespace collapsed)
    and its answer in the quote. The index maps through the member's order to a PMID, so
    members with different permutations citing the same document agree. An answer's modal
    PMID is the one its valid members cite most (ties: cited first); its score counts the
    valid members citing that PMID. The highest score wins; ties go to the more frequent
    answer among all members, then to the first seen. With no valid member this falls back
    to plain majority. Empty answers never win.

    Returns:
        A JSON-able dict: `winner` (str or None), `table` (rows of answer, score, frequency,
        pmid; best first), `valid` and `cited` (the mapped PMID, or None when the index is
        out of range) per member, and `citation_agreement`: the share of valid members citing
        the winner's modal PMID (0.0 if none is valid).
    """
    cited = [_cited_pmid(m) for m in members]
    valid = [_is_valid(m, pmid, texts, strict) for m, pmid in zip(members, cited, strict=True)]
    frequency = Counter(m.answer for m in members if m.answer)
    first_seen = {answer: rank for rank, answer in enumerate(frequency)}
    citations: dict[str, Counter[str]] = {answer: Counter() for answer in frequency}
    for member, pmid, ok in zip(members, cited, valid, strict=True):
        if ok and pmid is not None:
            citations[member.answer][pmid] += 1
    rows = []
    for answer in frequency:
        counts = citations[answer]
        # max keeps the first maximum, and a Counter iterates in first-cited order.
        pmid = max(counts, key=counts.__getitem__) if counts else None
        score = counts[pmid] if pmid is not None else 0
        rows.append(
            {"answer": answer, "score": score, "frequency": frequency[answer], "pmid": pmid}
        )
    rows.sort(key=lambda row: (-row["score"], -row["frequency"], first_seen[row["answer"]]))
    winner = rows[0] if rows else None
    n_valid = sum(valid)
    agreeing = sum(
        1 for pmid, ok in zip(cited, valid, strict=True) if ok and winner and pmid == winner["pmid"]
    )
    return {
        "winner": winner["answer"] if winner else None,
        "table": rows,
        "valid": valid,
        "cited": cited,
        "citation_agreement": agreeing / n_valid if n_valid else 0.0,
    }


@register("ccv")
class CCV(Strategy):
    """Permuted views whose members cite one passage; yes/no and factoid vote on citations."""

    cited = True

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[dict[str, Any]],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return permute_vote's views: the citations, not the orders, make the difference."""
        settings = ctx.settings.ensemble
        orders = permuted_views(len(contexts), settings.members, settings.contexts, seed)
        return Plan(every_model(models, orders, 0.0), contexts)

    async def tally(
        self, ctx: Context, qtype: str, members: list[dict[str, Any]], plan: Plan
    ) -> dict[str, Any]:
        """Return the majority table, re-ranked by citation consistency where one answer is due."""
        votes = await super().tally(ctx, qtype, members, plan)
        if qtype not in ("yesno", "factoid"):
            why = f"{qtype} answers are voted by majority (CCV needs one answer)"
            plan.diagnostics["ccv"] = why
            return votes
        strict = ctx.settings.ensemble.ccv.evidence == "strict"
        return votes | _ccv_vote(qtype, members, plan.contexts, strict=strict)


def _ccv_vote(
    qtype: str, members: list[dict[str, Any]], contexts: list[dict[str, Any]], *, strict: bool
) -> dict[str, Any]:
    """Re-rank the vote by citation consistency; the rest of the table keeps its order."""
    ok = [m for m in members if m["error"] is None and m["answer"]]
    cited = [
        CitedAnswer(
            answer=normalize_answer(m["answer"][0]),
            index=m.get("passage"),
            quote=m.get("quote"),
            order=tuple(m["order"]),
        )
        for m in ok
    ]
    texts = {c["pmid"]: f"{c.get('title') or ''} {c.get('abstract') or ''}" for c in contexts}
    chosen = ccv_select(cited, texts, strict=strict)
    surface = {normalize_answer(m["answer"][0]): m["answer"][0] for m in ok}
    winner = chosen["winner"]
    ranked = [surface[winner]] if winner else []
    if qtype == "factoid":  # the other candidates follow in CCV's order, up to five in all
        rest = [row["answer"] for row in chosen["table"] if row["answer"] != winner]
        ranked += [surface[k] for k in rest if k in surface][:4]
    return {
        "ranked": ranked,
        "ccv": {
            "winner": winner,
            "table": chosen["table"],
            "valid": chosen["valid"],
            "citation_agreement": chosen["citation_agreement"],
            "evidence": "strict" if strict else "relaxed",
        },
        "citation_agreement": chosen["citation_agreement"],
    }
