"""Citation-Consistent Voting (CCV): vote on the documents answers cite, not on strings."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from infra.bioasq import QuestionType, normalize_answer
from infra.models import ChatModel
from nodes.context import Context
from nodes.ensemble.decide import cited_by, majority_decision, order_pmids
from nodes.ensemble.strategies.registry import (
    Plan,
    Strategy,
    StrategySettings,
    every_model,
    register,
)
from nodes.ensemble.views import permuted_views
from nodes.state import CcvRow, DecidedAnswer, Decision, Member, Passage, Votes


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
    text: str = ""
    """The answer as the member wrote it (strict evidence looks for it in the quote); "": use
    `answer`."""


class Selection(TypedDict):
    """What `ccv_select` picked, and from what (its rows and validity go into `CcvVote`)."""

    winner: str | None
    """The normalized answer chosen (None when no member answered)."""
    table: list[CcvRow]
    """Answers by score, then frequency, then first seen."""
    valid: list[bool]
    """Per member: whether its citation holds up."""
    cited: list[str | None]
    """Per member: the PMID its index maps to (None when out of range)."""
    citation_agreement: float
    """Share of valid members citing the winner's modal PMID (0.0 when none is valid)."""


def _verbatim(text: str) -> str:
    """Return text as a quote is matched against its passage: Unicode, case and spaces only."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _words(text: str) -> str:
    """Return text as an answer is looked for in its quote: normalized, padded to whole words.

    Normalized as answers are, with hyphens and slashes as spaces ("IL 6" in "IL-6").
    """
    return f" {' '.join(normalize_answer(text).replace('-', ' ').replace('/', ' ').split())} "


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
    # The quote must stand in the passage as written (only Unicode form, case and spacing may
    # differ); the answer must stand in the quote after the normalization answers get on both
    # sides, so "Washington, D.C.", "O'Neill" or "Interleukin-6 (IL-6)" quoted verbatim pass.
    quote = member.quote or ""
    answer = _words(member.text or member.answer)
    return (
        bool(_verbatim(quote))
        and _verbatim(quote) in _verbatim(texts.get(pmid, ""))
        and answer.strip() != ""
        and answer in _words(quote)
    )


def ccv_select(
    members: Sequence[CitedAnswer],
    texts: Mapping[str, str],
    *,
    strict: bool = False,
) -> Selection:
    """Pick the answer whose members agree on one cited document, not merely on the answer.

    A member is valid when it answers and its 1-based index falls in its view; in strict mode
    its quote must also occur in the cited document (Unicode form, case and whitespace aside)
    and its answer in the quote (both normalized as answers are, on word boundaries). The
    index maps through the member's order to a PMID, so
    members with different permutations citing the same document agree. An answer's modal
    PMID is the one its valid members cite most (ties: cited first); its score counts the
    valid members citing that PMID. The highest score wins; ties go to the more frequent
    answer among all members (the paper's rule), then to the first seen (the paper stops at
    frequency; a rule is needed only so that runs are reproducible). With no valid member
    this falls back to plain majority. Empty answers never win.

    Returns:
        The winner, the table of answers (best first), each member's validity and mapped PMID,
        and the citation agreement (`Selection`).
    """
    cited = [_cited_pmid(m) for m in members]
    valid = [_is_valid(m, pmid, texts, strict) for m, pmid in zip(members, cited, strict=True)]
    frequency = Counter(m.answer for m in members if m.answer)
    first_seen = {answer: rank for rank, answer in enumerate(frequency)}
    citations: dict[str, Counter[str]] = {answer: Counter() for answer in frequency}
    for member, pmid, ok in zip(members, cited, valid, strict=True):
        if ok and pmid is not None:
            citations[member.answer][pmid] += 1
    rows: list[CcvRow] = []
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


@dataclass(frozen=True, kw_only=True)
class CcvSettings(StrategySettings):
    """CCV's settings beside every strategy's."""

    evidence: str
    """ccv.evidence: "relaxed" or "strict", which citations count."""
    vote: str
    """ccv.vote: "citation" (the method) or "answer_count" (its control)."""


@register("ccv")
class CCV(Strategy):
    """K permuted views whose members cite one passage; the answer whose citations agree wins.

    citation-consistent-voting.txt §3: K permutations of the top-N (§3.1), evidence-valid
    responses only (§3.2; relaxed by default, Table 3), each citation mapped through its
    member's permutation to a document id, the answer with the most valid citations of its
    modal document wins, ties by raw frequency (§3.3). One answer per member, so yes/no and
    factoid questions; list and summary answers are voted by majority, and the trace says so.
    `ccv.vote = "answer_count"` counts the same members' answers instead (the paper's MoA
    majority vote, §4.1): its control, at the same K, N and views.
    """

    def cites(self, qtype: str) -> bool:
        """Tell whether members cite one passage: for the question types CCV decides."""
        return qtype in (QuestionType.YESNO, QuestionType.FACTOID)

    async def plan(
        self,
        ctx: Context,
        question: str,
        contexts: list[Passage],
        models: list[ChatModel],
        seed: int,
    ) -> Plan:
        """Return K distinct orders of the top-m (the rank order first), answered greedily."""
        settings = ctx.settings.ensemble
        orders = permuted_views(len(contexts), settings.ccv.members, settings.ccv.contexts, seed)
        recorded = CcvSettings.of(
            ctx,
            models,
            members=settings.ccv.members,
            contexts=settings.ccv.contexts,
            evidence=settings.ccv.evidence,
            vote=settings.ccv.vote,
            temperature=0.0,
        )
        return Plan(every_model(models, orders, 0.0), contexts, recorded)

    async def tally(self, ctx: Context, qtype: str, members: list[Member], plan: Plan) -> Votes:
        """Return the majority table, and the citation vote where one answer per member is due."""
        votes = await super().tally(ctx, qtype, members, plan)
        if not self.cites(qtype):
            why = f"{qtype} answers are voted by majority (CCV needs one answer per member)"
            plan.diagnostics["ccv"] = why
            return votes
        strict = ctx.settings.ensemble.ccv.evidence == "strict"
        cited = _ccv_vote(qtype, members, plan, strict=strict)
        if ctx.settings.ensemble.ccv.vote == "answer_count":
            # CCV's control (§4.1, "MoA Majority Vote"): the same K cited answers, counted as
            # strings; the citation vote is only reported, so the trace shows what it changed.
            winner = cited["ranked"][0] if cited["ranked"] else None
            plan.diagnostics["ccv"] = (
                f"answer_count: the members' answers counted, citations unread (CCV's control, "
                f"the paper's MoA majority vote); the citation vote would pick {winner!r}"
            )
            return votes
        return votes | cited

    def decide(self, qtype: str, members: list[Member], plan: Plan, votes: Votes) -> Decision:
        """Return the citation vote's answers, the winner's passage first in the order."""
        ccv = votes.get("ccv")
        if not isinstance(ccv, dict):
            return majority_decision(
                self.name, qtype, members, plan, votes, how=plan.diagnostics.get("ccv", "")
            )
        order = order_pmids(plan)
        rows = ccv["table"]
        keyed, surface = _keyed(members, plan.clusters)
        answers: list[DecidedAnswer] = []
        for row in rows:
            cited = cited_by([m for m, key in keyed if key == row["answer"]])
            if row["pmid"] is not None:  # its modal passage first
                cited = [row["pmid"], *(p for p in cited if p != row["pmid"])]
            answers.append(
                {"answer": surface[row["answer"]], "support": float(row["score"]), "cited": cited}
            )
        decision: Decision = {
            "strategy": self.name,
            "answers": answers,
            "order": order,
            "why": "no member answered (citation-consistent vote)",
            "settings": plan.settings.record(),
            "source": "ensemble",
            "share": 0.0,
        }
        if not rows:
            return decision
        top, valid = rows[0], sum(ccv["valid"])
        if top["pmid"] is not None:
            decision["order"] = [top["pmid"], *(p for p in order if p != top["pmid"])]
        evidence = ccv["evidence"]
        if valid:
            why = (
                f"{surface[top['answer']]!r}: {top['score']} of {valid} valid citation(s) name "
                f"PMID {top['pmid']} (citation-consistent vote, {evidence} evidence)"
            )
            share = top["score"] / valid
        else:
            why = (
                f"{surface[top['answer']]!r}: no citation was valid ({evidence} evidence), so "
                f"the most frequent answer ({top['frequency']} of {len(ccv['valid'])}) wins"
            )
            share = top["frequency"] / max(1, len(ccv["valid"]))
        majority = (votes.get("table") or [{}])[0].get("normalized")
        if majority and majority != top["answer"]:
            why += f"; a plain majority would pick {surface.get(majority, majority)!r}"
        return decision | {"why": why, "share": round(share, 4)}


def _ccv_vote(qtype: str, members: list[Member], plan: Plan, *, strict: bool) -> Votes:
    """Score the answers by citation consistency; the ranked answers follow CCV's order."""
    keyed, surface = _keyed(members, plan.clusters)
    cited = [
        CitedAnswer(
            answer=key,
            index=m.get("passage"),
            quote=m.get("quote"),
            order=tuple(m["order"]),
            text=m["answer"][0],
        )
        for m, key in keyed
    ]
    texts = {c["pmid"]: f"{c.get('title') or ''} {c.get('abstract') or ''}" for c in plan.contexts}
    chosen = ccv_select(cited, texts, strict=strict)
    ranked = [surface[row["answer"]] for row in chosen["table"]]
    return {
        "ranked": ranked[:1] if qtype == "yesno" else ranked[:5],
        "ccv": {
            "winner": chosen["winner"],
            "table": chosen["table"],
            "valid": chosen["valid"],
            "citation_agreement": chosen["citation_agreement"],
            "evidence": "strict" if strict else "relaxed",
        },
        "citation_agreement": chosen["citation_agreement"],
    }


def _keyed(
    members: list[Member], clusters: dict[str, str]
) -> tuple[list[tuple[Member, str]], dict[str, str]]:
    """Return each answering member with its answer's vote key, and each key's usual spelling.

    Keys merge synonyms as the majority does, so CCV and the majority count the same answers.
    """
    keyed = []
    said: dict[str, Counter[str]] = {}
    for m in members:
        if m["error"] is None and m["answer"]:
            normalized = normalize_answer(m["answer"][0])
            key = clusters.get(normalized, normalized)
            keyed.append((m, key))
            said.setdefault(key, Counter())[m["answer"][0].strip()] += 1
    return keyed, {key: counts.most_common(1)[0][0] for key, counts in said.items()}
