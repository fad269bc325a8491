"""The ensemble node: every ensemble model answers every view of the contexts, concurrently.

Strategies (setting ensemble.strategy) differ in the views and in the vote:
- single: the top-m in rank order, one greedy call per model;
- self_consistency: the same top-m view K times, sampled;
- permute_vote: K orders of the top-m, greedy, majority vote;
- cobag: Context Bagging, a relevant core plus contexts sampled by relevance, shuffled; ties
  to the member whose view is most relevant;
- ccv: Citation-Consistent Voting, members cite one passage and the vote is on citations;
- moi: Mixture-of-Intervention, the model's likelihood of the question under several orders
  separates each passage's utility from the position bias; one answer in the debiased order.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model

from infra.bioasq import normalize_answer
from infra.embeddings import document_text
from infra.models import ChatModel, LikelihoodUnavailable
from nodes.context import Context
from nodes.ensemble.strategies import (
    CitedAnswer,
    ccv_select,
    cobag_views,
    mean_relevance,
    moi_permutations,
    moi_solve,
)
from nodes.ensemble.views import permuted_views, view_seed
from nodes.ensemble.vote import candidate_keys, synonym_clusters, vote
from nodes.evidence import (
    TYPE_INSTRUCTIONS,
    as_answers,
    checked_citations,
    exact_field,
    passages,
    pmid_type,
)
from nodes.progress import report
from nodes.state import QAState
from prompts import render


class StrategyUnavailable(RuntimeError):
    """The configured strategy cannot run with these models (it is refused, never faked)."""


def member_schema(qtype: str, pmids: list[str]) -> type[BaseModel]:
    """Return the structured answer a member gives for this question type and these passages."""
    answer_type, answer_field = exact_field(qtype)
    return create_model(
        "MemberAnswer",
        answer=(answer_type, answer_field),
        pmids=(
            list[pmid_type(pmids)],
            Field(description="PMIDs supporting the answer", max_length=3),
        ),
    )


def cited_schema(qtype: str, shown: int) -> type[BaseModel]:
    """Return a CCV member's answer: one answer, the number of one passage, and a quote."""
    answer_type, answer_field = exact_field(qtype)
    if qtype in ("factoid", "list"):
        answer_type, answer_field = (
            str,
            Field(description="The answer, a short name", max_length=80),
        )
    return create_model(
        "CitedAnswer",
        answer=(answer_type, answer_field),
        passage=(
            Literal[tuple(range(1, shown + 1))],
            Field(description="Number of the one passage that best supports the answer"),
        ),
        quote=(str, Field(description="A short quote from that passage", max_length=200)),
    )


@dataclass(frozen=True)
class View:
    """What one member call sees: a model, an order of contexts, a temperature."""

    model: ChatModel
    number: int
    order: list[int]
    temperature: float


async def ensemble(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer from the strategy's views with every ensemble model, concurrently, and vote."""
    ctx = runtime.context
    settings = ctx.settings.ensemble
    strategy = settings.strategy
    qtype = state["qtype"]
    question = state["question"]
    contexts = state.get("organized") or state.get("contexts") or []
    if not contexts:
        return {"members": [], "votes": vote(qtype, []) | {"strategy": strategy}}
    models = ctx.models.role("ensemble")
    seed = view_seed(settings.seed, question)
    calls: list[dict[str, Any]] = []
    diagnostics: dict[str, Any] = {}
    weights: list[float] | None = None
    m = settings.contexts
    if strategy == "single":
        orders, temperature = [list(range(min(len(contexts), m)))], 0.0
    elif strategy == "self_consistency":
        top = list(range(min(len(contexts), m)))
        orders, temperature = [top] * settings.members, settings.sample_temperature
    elif strategy in ("permute_vote", "ccv"):
        orders, temperature = permuted_views(len(contexts), settings.members, m, seed), 0.0
    elif strategy == "cobag":
        bag = settings.cobag
        relevance = await _relevance(ctx, question, contexts)
        orders = cobag_views(
            relevance,
            members=bag.members,
            size=bag.contexts,
            core=min(bag.core, bag.contexts),
            tau=bag.tau,
            seed=seed % 2**32,
        )
        temperature = 0.0
        weights = [mean_relevance(o, relevance) for o in orders]
        diagnostics["relevance"] = {
            c["pmid"]: round(float(r), 4) for c, r in zip(contexts, relevance, strict=True)
        }
    elif strategy == "moi":
        return await _moi(ctx, state, contexts, models, seed)
    else:  # settings validation makes this unreachable; fail loudly if it is not
        raise StrategyUnavailable(f"unknown ensemble strategy {strategy!r}")
    views = [
        View(model, number, order, temperature)
        for model in models
        for number, order in enumerate(orders)
    ]
    members = await _answer_views(views, question, qtype, contexts, cited=strategy == "ccv")
    calls.extend(m.pop("call") for m in members)
    if weights is not None:
        weights = [weights[m["view"]] for m in members]
    votes = await _vote(ctx, qtype, members, weights)
    if strategy == "ccv" and qtype in ("yesno", "factoid"):
        votes |= _ccv_vote(qtype, members, contexts, strict=settings.ccv.evidence == "strict")
    elif strategy == "ccv":
        diagnostics["ccv"] = f"{qtype} answers are voted by majority (CCV needs one answer)"
    notes = [note for m in members for note in m.pop("citation_notes", [])]
    if failed := sum(m["error"] is not None for m in members):
        notes.append(f"ensemble: {failed} of {len(members)} member(s) failed and were dropped")
    return {
        "members": members,
        "votes": votes | {"strategy": strategy, "failed": failed, **diagnostics},
        "calls": calls,
        "notes": notes,
    }


async def _relevance(ctx: Context, question: str, contexts: list[dict[str, Any]]) -> np.ndarray:
    """Return cosine(question, context) per context from the embedder."""

    def compute() -> np.ndarray:
        query = ctx.embedder.embed_query(question)
        docs = ctx.embedder.embed_documents(
            [document_text(c.get("title", ""), c.get("abstract", "")) for c in contexts]
        )
        return docs @ query

    return await asyncio.to_thread(compute)


async def _answer_views(
    views: list[View],
    question: str,
    qtype: str,
    contexts: list[dict[str, Any]],
    *,
    cited: bool,
) -> list[dict[str, Any]]:
    # Each model bounds its own calls in flight (per endpoint, from its spec), so views of
    # different endpoints never wait for one another.
    done = 0

    async def counted(view: View) -> dict[str, Any]:
        nonlocal done
        member = await _member(view, question, qtype, contexts, cited=cited)
        done += 1
        report("ensemble", done=done, total=len(views))
        return member

    report("ensemble", done=0, total=len(views))
    return list(await asyncio.gather(*(counted(view) for view in views)))


async def _member(
    view: View,
    question: str,
    qtype: str,
    contexts: list[dict[str, Any]],
    *,
    cited: bool,
) -> dict[str, Any]:
    docs = [contexts[i] for i in view.order]
    model = view.model
    instructions = TYPE_INSTRUCTIONS[qtype]
    if cited:
        instructions += " Give the number of the one passage that best supports it, and a quote."
        schema = cited_schema(qtype, len(docs))
    else:
        schema = member_schema(qtype, [d["pmid"] for d in docs])
    messages = render(
        "ensemble",
        instructions=instructions,
        contexts=passages(docs, model.context_chars),
        question=question,
    )
    reply = await model.structured(schema, messages, temperature=view.temperature)
    value = reply.value
    record: dict[str, Any] = {
        "model": model.name,
        "view": view.number,
        "order": [d["pmid"] for d in docs],
        "temperature": view.temperature,
        "answer": as_answers(qtype, value.answer) if value else [],
        "pmids": [],
        "raw": reply.raw,
        "error": reply.error,
        "latency_s": round(reply.latency_s, 3),
        "tokens": reply.input_tokens + reply.output_tokens,
        "call": reply.record("ensemble"),
    }
    if value is not None and cited:
        record |= {"passage": value.passage, "quote": value.quote}
        record["pmids"] = [docs[value.passage - 1]["pmid"]]
    elif value is not None:
        record["pmids"], record["citation_notes"] = checked_citations(
            list(value.pmids), [d["pmid"] for d in docs], f"ensemble member {view.number}"
        )
    return record


async def _vote(
    ctx: Context, qtype: str, members: list[dict[str, Any]], weights: list[float] | None
) -> dict[str, Any]:
    answers = [m["answer"] if m["error"] is None else [] for m in members]
    clusters = None
    if qtype in ("factoid", "list"):
        keys = candidate_keys(answers)
        if len(keys) > 1:
            vectors = await asyncio.to_thread(ctx.embedder.embed_documents, keys)
            clusters = synonym_clusters(
                keys, vectors, threshold=ctx.settings.ensemble.synonym_cosine
            )
    return vote(
        qtype,
        answers,
        list_quorum=ctx.settings.ensemble.list_quorum,
        weights=weights,
        clusters=clusters,
    )


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


async def _moi(
    ctx: Context,
    state: QAState,
    contexts: list[dict[str, Any]],
    models: list[ChatModel],
    seed: int,
) -> dict[str, Any]:
    """Observe each model's likelihood of the question under several orders, debias, answer."""
    settings = ctx.settings.ensemble
    question, qtype = state["question"], state["qtype"]
    top = contexts[: settings.contexts]
    perms = moi_permutations(
        len(top),
        settings.moi.permutations,
        prefix_length=settings.moi.prefix_length,
        seed=seed % 2**32,
    )
    scores = np.array([float(c.get("score") or 0.0) for c in top])
    calls: list[dict[str, Any]] = []
    fits: dict[str, Any] = {}
    views: list[View] = []

    async def observe(model: ChatModel) -> list[float]:
        return list(
            await asyncio.gather(
                *(_observe(model, question, [top[i] for i in perm], calls) for perm in perms)
            )
        )

    try:
        observed = await asyncio.gather(*(observe(model) for model in models))
    except LikelihoodUnavailable as exc:
        raise StrategyUnavailable(f"ensemble strategy 'moi': {exc}") from None
    for number, (model, observations) in enumerate(zip(models, observed, strict=True)):
        obs = np.array(observations)
        spread = float(obs.std()) or 1.0
        z = (scores - scores.mean()) / (scores.std() or 1.0)
        prior = obs.mean() + z * spread  # the retriever's ranking, in the likelihoods' units
        fit = moi_solve(perms, obs, len(top), prior=prior, ridge=settings.moi.ridge, seed=seed)
        order = fit.order()
        views.append(View(model, number, order, 0.0))
        fits[f"{number}:{model.name}"] = {
            "observations": [round(float(o), 3) for o in obs],
            "permutations": [[top[i]["pmid"] for i in p] for p in perms],
            "position_weights": [round(float(a), 4) for a in fit.weights],
            "utilities": {top[i]["pmid"]: round(float(u), 4) for i, u in enumerate(fit.utilities)},
            "order": [top[i]["pmid"] for i in order],
            "residual": round(float(fit.residual), 6),
        }
    members = await _answer_views(views, question, qtype, top, cited=False)
    calls.extend(m.pop("call") for m in members)
    votes = await _vote(ctx, qtype, members, None)
    failed = sum(m["error"] is not None for m in members)
    notes = [f"ensemble: {failed} of {len(members)} member(s) failed"] if failed else []
    return {
        "members": members,
        "votes": votes | {"strategy": "moi", "failed": failed, "moi": fits},
        "calls": calls,
        "notes": notes,
    }


async def _observe(
    model: ChatModel, question: str, docs: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> float:
    context = passages(docs, model.context_chars) + "\n\nQuestion: "
    started, wall = time.perf_counter(), time.time()
    value, tokens = await model.loglikelihood(context, question)
    calls.append(
        {
            "node": "ensemble",
            "kind": "loglikelihood",
            "model": model.name,
            "started": round(wall, 4),
            "latency_s": round(time.perf_counter() - started, 3),
            "input_tokens": tokens,
            "output_tokens": 0,
            "raw": "",
            "error": None,
        }
    )
    return value
