"""The answer as a block, in the same words wherever it is shown.

ask, chat, the page, `trace show` (finalize's trace) and the HTML export all read it from here.
"""

from __future__ import annotations

from typing import Any

from nodes.describing import confidence_text
from nodes.records import JUDGES, PassageRelevance, Result
from nodes.trace_view import AnswerBlock, Cited, Retrieved


def exact_text(exact: Any) -> str | None:
    """Return an exact answer as words ("yes"; "TNF; IL-6"), or None for a summary."""
    if exact is None:
        return None
    if isinstance(exact, list):
        names = [item[0] if isinstance(item, list) and item else item for item in exact]
        return "; ".join(str(n) for n in names if n) or "(none)"
    return str(exact)


def given_exact(result: Result) -> Any:
    """Return the exact answer a result gives: None when nothing was supported (insufficient).

    finalize gives none then; a result kept from before it did may hold an empty answer shaped
    as "no", which is no answer either.
    """
    return None if result.get("insufficient") else result.get("exact_answer")


def relevance_text(record: PassageRelevance | None) -> str:
    """Return a passage's relevance verdict in words ("" when it was not judged).

    "on the question (62% of its key terms, cosine 0.58)"; "off the question (…)".
    """
    if not isinstance(record, dict) or "relevant" not in record:
        return ""
    signals = [f"{float(record.get('terms') or 0.0):.0%} of its key terms"]
    if record.get("cosine") is not None:
        signals.append(f"cosine {float(record['cosine']):.2f}")
    if record.get("cross_encoder") is not None:
        signals.append(f"cross-encoder {float(record['cross_encoder']):.2f}")
    verdict = "on the question" if record["relevant"] else "off the question"
    return f"{verdict} ({', '.join(signals)})"


def cited_evidence(result: Result) -> list[Cited]:
    """Return the passages the answer rests on: pmid, title, supporting sentence, relevance."""
    titles = result.get("titles") or {}
    judged = result.get("relevance") or {}
    rows = []
    for item in result.get("evidence") or []:
        if not isinstance(item, dict) or not item.get("pmid"):
            continue
        pmid = str(item["pmid"])
        title = item.get("title") or titles.get(pmid) or ""
        relevance = relevance_text(item.get("relevance") or judged.get(pmid))
        rows.append(Cited(pmid, title, item.get("sentence") or "", relevance))
    return rows


def retrieved_documents(result: Result) -> list[Retrieved]:
    """Return the retrieved documents in retrieval order: pmid, title, cited, relevance."""
    titles = result.get("titles") or {}
    judged = result.get("relevance") or {}
    cited = {row.pmid for row in cited_evidence(result)}
    return [
        Retrieved(str(p), titles.get(p) or "", str(p) in cited, relevance_text(judged.get(p)))
        for p in result.get("documents") or []
    ]


def support_text(result: Result) -> str | None:
    """Return what the support check says of a given answer, or None (refused, or older).

    Never "carried by the cited passages" beside a passage judged off the question: such a
    passage is no evidence, so a result that shows one says so instead.
    """
    support = result.get("support") or {}
    if support.get("verdict") != "supported":
        return None
    off = [row.pmid for row in cited_evidence(result) if row.relevance.startswith("off")]
    if off:
        return f"not carried: PMID {', '.join(off)} cited beside it is off the question"
    verified = support.get("verified", "not verified")
    if verified == "self-verified":
        # The only judge was the author: say so, so no reader takes it for a second opinion.
        verified = f"self-verified: judged only by {JUDGES['self']}"
    why = f" ({support['why']})" if support.get("why") else ""
    if "evidence" in result and not result["evidence"]:
        return f"carried by the passages it was made from (it cites none); {verified}{why}"
    return f"carried by the cited passages; {verified}{why}"


def answer_view(result: Result, *, documents: int | None = None) -> AnswerBlock:
    """Return the answer as a block: exact, ideal, confidence, support, evidence, retrieved.

    Args:
        result: The graph's final result.
        documents: Keep at most this many retrieved documents (all when None).
    """
    retrieved = retrieved_documents(result)
    shown = retrieved if documents is None else retrieved[:documents]
    kept = "evidence" in result
    return AnswerBlock(
        qtype=result.get("type") or "?",
        exact=exact_text(given_exact(result)),
        ideal=result.get("ideal_answer") or "",
        insufficient=bool(result.get("insufficient")),
        confidence=confidence_text(result),
        support=support_text(result),
        evidence=tuple(cited_evidence(result)) if kept else None,
        documents=tuple(shown),
        more=len(retrieved) - len(shown),
    )
