"""finalize: the BioASQ-shaped answer, with documents best first and snippets with offsets."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from infra.bioasq import exact_answer_shape
from infra.bioasq.contract import insufficient_answer
from infra.embeddings import Embedder
from infra.snippets import chosen_snippets, supporting_sentences
from nodes.answered import why_unanswered
from nodes.context import Context
from nodes.records import ALL_FAILED, Answer, Call, SupportSummary, verified_label
from nodes.state import Evidence, Passage, QAState

MAX_DOCUMENTS = 10
ANSWERING_ROLES = {"ensemble": "ensemble", "synthesize": "synthesis"}
"""The nodes whose calls answer the question, and the role each one's models play."""
SHOWN_REPLY = 80
"""Characters of a failed reply a model failure quotes."""


async def finalize(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Shape the answer by type: cited evidence beside it, retrieved documents in rank order."""
    ctx = runtime.context
    qtype = state["qtype"]
    answer: Answer = state.get("answer") or {
        "exact": [],
        "ideal": "",
        "confidence": 0.0,
        "cited": [],
    }
    contexts = state.get("organized") or state.get("contexts") or []
    known = {c["pmid"]: c for c in state.get("contexts", [])}
    by_pmid = {c["pmid"]: c for c in contexts} | known
    # What BioASQ scores in phase A: the retrieved documents in retrieval order, never
    # re-ordered by what the answer cites (the cited ones ride beside it, as evidence).
    ranked = [p for p, _ in state.get("ranked", [])] or [c["pmid"] for c in contexts]
    documents = list(dict.fromkeys(ranked))[:MAX_DOCUMENTS]
    chosen = ctx.settings.snippets
    snippet_docs = [by_pmid[p] for p in documents if p in by_pmid][: chosen.documents]
    exact = exact_answer_shape(qtype, answer.get("exact", []))
    ideal = (answer.get("ideal") or "").strip()
    # CORG's groups answered (organize's model calls): then a model did answer the question.
    grouped = any(g.get("answer") for g in state.get("groups") or [])
    failure = None if grouped else model_failure(state.get("calls") or [])
    reason = failure or _why_unanswered(state, answer, qtype, exact, ideal)
    cited = [p for p in answer.get("cited", []) if p in by_pmid] if reason is None else []
    snippets, evidence = await asyncio.gather(
        asyncio.to_thread(
            chosen_snippets,
            state["question"],
            snippet_docs,
            ctx.embedder,
            chosen,
            ctx.snippet_scorer,
        ),
        asyncio.to_thread(
            cited_evidence, state["question"], answer, [by_pmid[p] for p in cited], ctx.embedder
        ),
    )
    judged = state.get("relevance") or {}
    for item in evidence:
        if item["pmid"] in judged:
            item["relevance"] = judged[item["pmid"]]
    if reason:
        # Say so in the answer itself rather than pass junk or nothing off as a result, and
        # give no exact answer: an empty answer shaped as yes/no would read "no", a guess.
        ideal = insufficient_answer(reason)
        exact = None
    return {
        "result": {
            "insufficient": reason is not None,
            "insufficient_reason": reason,
            "failed": failure is not None,
            "question": state["question"],
            "type": qtype,
            "exact_answer": exact,
            "ideal_answer": ideal,
            "confidence": 0.0 if reason else answer.get("confidence", 0.0),
            "model_confidence": answer.get("model_confidence"),
            "confidence_parts": answer.get("confidence_parts") or {},
            "evidence": evidence,
            "documents": documents,
            "snippets": snippets,
            "titles": {p: by_pmid[p].get("title", "") for p in documents if p in by_pmid},
            "support": support_summary(answer, reason),
            "relevance": {p: judged[p] for p in [*documents, *cited] if p in judged},
        }
    }


def support_summary(answer: Answer, reason: str | None) -> SupportSummary | None:
    """Return what the support check said of the answer given: verdict, verifier, why."""
    support = answer.get("support")
    if not support:
        return None
    verified = support.get("verified") or {}
    summary: SupportSummary = {
        "verdict": "refused" if reason else support["verdict"],
        "verified": verified_label(verified),
        "why": verified.get("why") or support.get("reason") or "",
    }
    if judge := verified.get("judge"):
        summary["judge"] = judge
    return summary


def cited_evidence(
    question: str, answer: Answer, docs: list[Passage], embedder: Embedder
) -> list[Evidence]:
    """Return each cited passage with the sentence of it that best supports the answer."""
    if not docs:
        return []
    text = "; ".join(answer.get("exact") or []) or (answer.get("ideal") or "")
    found = supporting_sentences(question, text, docs, embedder)
    # Where the support check found an answer carried, that sentence is the evidence shown.
    carried = {}
    for c in reversed((answer.get("support") or {}).get("carriers") or []):
        carried[c["pmid"]] = c
    out: list[Evidence] = []
    for doc in docs:
        if (c := carried.get(doc["pmid"])) is not None:
            out.append(
                {
                    "pmid": doc["pmid"],
                    "title": doc.get("title", ""),
                    "sentence": c["sentence"],
                    "section": c["section"],
                    "offset": c["offset"],
                }
            )
            continue
        sentence = found.get(doc["pmid"])
        out.append(
            {
                "pmid": doc["pmid"],
                "title": doc.get("title", ""),
                "sentence": sentence.text if sentence else "",
                "section": sentence.section if sentence else "",
                "offset": sentence.begin if sentence else 0,
            }
        )
    return out


def model_failure(calls: list[Call]) -> str | None:
    """Return why no model answered at all, or None when one reply of the answering roles parsed.

    The one rule for "the model failed, not the evidence": the ensemble members and the
    synthesis attempts made calls, and not one reply came back parseable (junk, empty, an
    error). The reason names each endpoint and role once, with what it returned.
    """
    answering = [
        c for c in calls if c.get("node") in ANSWERING_ROLES and c.get("kind") != "loglikelihood"
    ]
    if not answering or any(c.get("error") is None for c in answering):
        return None
    first: dict[tuple[str, str], Call] = {}
    for call in answering:
        where = call.get("endpoint") or f"model {call.get('model')!r}"
        first.setdefault((ANSWERING_ROLES[call["node"]], where), call)
    said = "; ".join(f"{role}: {where} {_what_came(call)}" for (role, where), call in first.items())
    return f"{ALL_FAILED}: {said}"


def _what_came(call: Call) -> str:
    """Return what a failed call got: the reply it could not use, or the failure with none."""
    error = str(call.get("error"))[:300]
    raw = call.get("raw") or ""
    # A reply that came back empty was returned; a call that got no reply (refused, timed out,
    # an HTTP error) returned nothing at all, and saying it "returned ''" would blame the model.
    if raw or error.startswith("unparseable output"):
        return f"returned {raw[:SHOWN_REPLY]!r} ({error})"
    return f"failed with no reply ({error})"


def _why_unanswered(
    state: QAState, answer: Answer, qtype: str, exact: Any, ideal: str
) -> str | None:
    """Return why a question that was to be answered has no answer (the one door), else None."""
    members = state.get("members") or []
    if state.get("answer") is None and not members:
        return None  # phase A retrieves only: nothing was to be answered
    errors = [a["error"] for a in state.get("attempts", []) if a.get("error")]
    return why_unanswered(
        qtype,
        state["question"],
        exact,
        ideal,
        said=str(answer["insufficient"]) if answer.get("insufficient") else None,
        members=members,
        verdict=(answer.get("support") or {}).get("verdict"),
        failed=errors[-1] if errors else None,
    )
