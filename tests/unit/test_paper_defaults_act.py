"""The papers' defaults held where they act: each one observed in what the code using it does.

test_paper_defaults.py holds docs/methods.md's table ("The papers' defaults") against
`Settings()`; a value written into the code that uses a setting passed it (a CoBag pool of 15,
MoI's answer order fixed). Here every row of that table is observed in the behaviour of the
code that acts on it: with the settings as shipped the code must do what the paper's value
says (a default changed, or bypassed by a value in the code, fails), and with another value it
must do what that value says (a setting the code ignores fails). The values the papers fix
that no setting carries (the table "held in the code": MoI's 3N orders, the retry at
temperature 0, greedy members, the tie-breaks, CORG's plural question) are observed the same
way. Every test's id and message name the paper and its section.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langgraph.runtime import Runtime

from graphs.routers import needs_refinement, needs_resynthesis
from infra.embeddings import document_text
from infra.search.base import SearchResult
from infra.search.embedded import EmbeddedIndex
from infra.settings import Settings, load_settings
from nodes.context import Context
from nodes.ensemble import ensemble
from nodes.ensemble.strategies import STRATEGIES as ENSEMBLE
from nodes.ensemble.strategies import cobag_views
from nodes.ensemble.strategies.ccv import CitedAnswer, ccv_select
from nodes.ensemble.strategies.moi_fit import MoIFit
from nodes.generate_query import limits
from nodes.organize import organize
from nodes.rerank import rerank
from nodes.search import search
from nodes.seeds import question_seed
from nodes.synthesize import synthesize
from tests.support.fakes import HashEmbedder, pmids_in, script
from tests.unit.test_paper_defaults import DEFAULTS, METHODS_DOC

HELD_HEADING = "## The papers' values held in the code"
QUESTION = "Which ion channel is mutated in cystic fibrosis airway disease?"
SEED = 7


def held_rows() -> list[dict[str, str]]:
    """Return the rows of the table "held in the code" of docs/methods.md's section."""
    text = METHODS_DOC.read_text(encoding="utf-8")
    section = text.split(f"{HELD_HEADING}\n", 1)[1].split("\n## ", 1)[0]
    rows, header = [], None
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set("".join(cells)) <= set("-: "):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


HELD = held_rows()


# --- what the probes run on ------------------------------------------------------------------


def passages(n: int) -> list[dict[str, Any]]:
    """Return n distinct passages, best reranked first (words vary, so relevance does)."""
    words = ["channel", "airway", "chloride", "sodium", "mucus", "lung", "gene", "cell"]
    return [
        {
            "pmid": f"9{i:03d}",
            "title": f"Study {i} of {words[i % 8]} and {words[(i * 3 + 1) % 8]}",
            "abstract": f"Passage {i}: the {words[(i * 5 + 2) % 8]} finding number {i} "
            f"about cystic fibrosis {'ion channel' if i % 4 == 0 else 'patients'}.",
            "score": round(1.0 - i / 100, 4),
        }
        for i in range(n)
    ]


def relevance(contexts: list[dict[str, Any]]) -> np.ndarray:
    """Return cosine(question, passage) as CoBag computes it, with the test embedder."""
    embedder = HashEmbedder()
    docs = embedder.embed_documents(
        [document_text(c.get("title", ""), c.get("abstract", "")) for c in contexts]
    )
    return docs @ embedder.embed_query(QUESTION)


def changed(settings: Settings, path: str, value: Any) -> Settings:
    """Return settings with one dotted setting changed (validated as a user's would be)."""
    data = settings.model_dump()
    *groups, name = path.split(".")
    node = data
    for group in groups:
        node = node[group]
    node[name] = value
    return load_settings(**{k: v for k, v in data.items() if k != "presets"})


@dataclass
class Probe:
    """How one default is observed: what the acting code does, and another value to try."""

    observe: Callable[[Any, Settings], Awaitable[Any]]
    """(make_context, settings) → the value the code's behaviour shows in effect."""
    other: Any
    """Another value: with it set, the code must show it instead."""


async def plan(make_context, settings: Settings, name: str, n: int = 30, model=None):
    """Return the named ensemble strategy's plan for n passages (one model)."""
    ctx = make_context(model or script(), settings_=settings)
    return await ENSEMBLE[name].plan(ctx, QUESTION, passages(n), ctx.models.role("ensemble"), SEED)


def one(values: set[Any]) -> Any:
    """Return the single value every place showed, or all of them when they disagree."""
    return next(iter(values)) if len(values) == 1 else sorted(values, key=repr)


# --- Context Bagging ---------------------------------------------------------------------------


async def cobag_members(make_context, settings):
    return len((await plan(make_context, settings, "cobag")).views)


async def cobag_contexts(make_context, settings):
    return one({len(v.order) for v in (await plan(make_context, settings, "cobag")).views})


async def cobag_core(make_context, settings):
    # With 32 bags no context drawn at random is in every one of them: only the core is.
    many = changed(settings, "ensemble.cobag.members", 32)
    views = (await plan(make_context, many, "cobag")).views
    return len(set.intersection(*(set(v.order) for v in views)))


async def cobag_pool(make_context, settings):
    found = await plan(make_context, settings, "cobag")
    assert max(i for v in found.views for i in v.order) < len(found.contexts)
    return len(found.contexts)


async def cobag_shuffle(make_context, settings):
    views = (await plan(make_context, settings, "cobag")).views
    return any(v.order != sorted(v.order) for v in views)


def reproduced_by(path: str, candidates: tuple[Any, ...]):
    """Observe which candidate value of a CoBag setting the paper's sampler needs to draw
    exactly the bags the strategy drew (None when no one value does)."""

    async def observe(make_context, settings):
        found = await plan(make_context, settings, "cobag")
        bag = settings.ensemble.cobag
        pool = passages(30)[: len(found.contexts)]
        drawn = [v.order for v in found.views]
        fits = []
        for value in candidates:
            chosen = {
                "tau": bag.tau,
                "sampling": bag.sampling,
                path: value,
            }
            reference = cobag_views(
                relevance(pool),
                members=bag.members,
                size=bag.contexts,
                core=min(bag.core, bag.contexts),
                tau=chosen["tau"],
                seed=SEED % 2**32,
                shuffle=bag.shuffle,
                sampling=chosen["sampling"],
            )
            fits.append((value, reference == drawn, reference))
        assert fits[0][2] != fits[1][2], f"cobag.{path} changes no bag: nothing to observe"
        matched = [value for value, same, _ in fits if same]
        return matched[0] if len(matched) == 1 else None

    return observe


# --- the ensembles' K and m ----------------------------------------------------------------


async def members_k(make_context, settings):
    sizes = set()
    for name in ("permute_vote", "self_consistency"):
        sizes.add(len((await plan(make_context, settings, name)).views))
    return one(sizes)


async def contexts_m(make_context, settings):
    sizes = set()
    for name in ("single", "permute_vote", "self_consistency"):
        sizes |= {len(v.order) for v in (await plan(make_context, settings, name)).views}
    moi = await moi_plan(make_context, settings, n=20)
    sizes.add(len(moi.contexts))
    # What synthesis reads when no strategy chose an order: the top m as well.
    model = script(synthesize=synthesis_reply(0.9))
    state = synthesis_state(passages(20)) | {"decision": None}
    await synthesize(state, Runtime(context=make_context(model, settings_=settings)))
    sizes.add(len(pmids_in(model.calls[0]["messages"])))
    return one(sizes)


async def sample_temperature(make_context, settings):
    views = (await plan(make_context, settings, "self_consistency")).views
    return one({v.temperature for v in views})


# --- Citation-Consistent Voting ----------------------------------------------------------------


async def ccv_members(make_context, settings):
    return len((await plan(make_context, settings, "ccv")).views)


async def ccv_contexts(make_context, settings):
    return one({len(v.order) for v in (await plan(make_context, settings, "ccv")).views})


RIGHT, WRONG = "ENaC", "CFTR"
CITED = [(WRONG, 0), (WRONG, 1), (WRONG, 2), (RIGHT, 3), (RIGHT, 3)]
"""Three members name the wrong answer, each citing another abstract; two name the right one,
both citing the fourth abstract wherever their view put it."""


def citing_members(quote: Callable[[str], str] = lambda text: text[:40]):
    shown = passages(6)
    calls: list[int] = []

    def reply(messages, kwargs):
        order = pmids_in(messages)
        answer, cited = CITED[len(calls) % len(CITED)]
        calls.append(cited)
        pmid = shown[cited]["pmid"]
        number = order.index(pmid) + 1 if pmid in order else 1
        return {"answer": answer, "passage": number, "quote": quote(shown[cited]["title"])}

    return script(ensemble=reply)


async def ccv_run(make_context, settings, model) -> dict[str, Any]:
    small = changed(changed(settings, "ensemble.strategy", "ccv"), "ensemble.ccv.members", 5)
    small = changed(small, "ensemble.ccv.contexts", 6)
    state = {"question": QUESTION, "qtype": "factoid", "organized": passages(6)}
    return await ensemble(state, Runtime(context=make_context(model, settings_=small)))


async def ccv_vote(make_context, settings):
    update = await ccv_run(make_context, settings, citing_members())
    first = update["decision"]["answers"][0]["answer"]
    return {RIGHT: "citation", WRONG: "answer_count"}[first]


async def ccv_evidence(make_context, settings):
    # Every quote is cut from its title with a word added: no quote stands in its abstract.
    model = citing_members(lambda text: f"{text[:30]} reportedly")
    valid = (await ccv_run(make_context, settings, model))["votes"]["ccv"]["valid"]
    return "relaxed" if all(valid) else "strict" if not any(valid) else valid


# --- Mixture-of-Intervention -------------------------------------------------------------------


class Likelihoods:
    """A model whose log-likelihood of an order is MoI's own linear model (Eq. 4).

    s = Σ_j a_j · u(π_j), a rising with position (a recency lean, so the most useful passage
    first and the paired order differ), u falling with rank (the retriever is right); it records
    every (context, continuation) it is asked about.
    """

    name = "likelihoods"
    context_chars = 400

    def __init__(self, n: int):
        self.utility = {p["pmid"]: 1.0 - 0.07 * i for i, p in enumerate(passages(n))}
        self.asked: list[tuple[str, str]] = []

    async def loglikelihood(self, context: str, continuation: str) -> tuple[float, int]:
        self.asked.append((context, continuation))
        order = [p for p in pmids_in_text(context + continuation) if p in self.utility]
        weights = np.arange(1, len(order) + 1, dtype=float)
        weights /= weights.sum()
        return float(sum(a * self.utility[p] for a, p in zip(weights, order, strict=True))), 1


def pmids_in_text(text: str) -> list[str]:
    import re

    return re.findall(r"PMID (\S+)", text)


async def moi_plan(make_context, settings, n: int = 12, model: Likelihoods | None = None):
    ctx = make_context(script(), settings_=settings)
    return await ENSEMBLE["moi"].plan(ctx, QUESTION, passages(n), [model or Likelihoods(n)], SEED)


def moi_fit(found) -> dict[str, Any]:
    (fit,) = found.diagnostics["moi"].values()
    return fit


async def moi_permutations(make_context, settings):
    n = settings.ensemble.contexts
    perms = moi_fit(await moi_plan(make_context, settings))["permutations"]
    top = [p["pmid"] for p in passages(n)]
    if all(len(p) == n for p in perms):
        shifts = [top[k:] + top[:k] for k in range(n)]
        return "cyclic" if perms == shifts else "random"
    lengths = {len(p) for p in perms}
    return "prefix" if len(lengths) == 1 else "variable"


async def moi_observation(make_context, settings):
    model = Likelihoods(12)
    await moi_plan(make_context, settings, model=model)
    contexts = {context == "" for context, _ in model.asked}
    # joint: the passages and the question scored together, P(q | π)·P(π) (Eq. 3)
    return one({"joint" if empty else "question" for empty in contexts})


async def moi_weights(make_context, settings):
    weights = moi_fit(await moi_plan(make_context, settings))["position_weights"]
    return "flat" if max(weights) - min(weights) < 1e-6 else "fitted"


async def moi_order(make_context, settings):
    found = await moi_plan(make_context, settings)
    fit = moi_fit(found)
    pmids = [p["pmid"] for p in found.contexts]
    recovered = MoIFit(
        weights=np.array(fit["position_weights"]),
        utilities=np.array([fit["utilities"][p] for p in pmids]),
        residual=0.0,
    )
    ways = {how: [pmids[i] for i in recovered.order(how)] for how in ("descending", "paired")}
    assert ways["descending"] != ways["paired"], "the fit leaves the two orders the same"
    read = [pmids[i] for i in found.views[0].order]
    return next((how for how, order in ways.items() if order == read), read)


# --- CORG and its baselines --------------------------------------------------------------------

TRIPLE = {"answer": "CFTR", "entity": "cystic fibrosis", "descriptor": ""}


def organizer(label: str = "none"):
    return script(
        relation={"first": TRIPLE, "second": TRIPLE, "label": label},
        pluralize={"question": "Which ion channels are mutated in cystic fibrosis?"},
        group=lambda m, kw: {"answer": "CFTR.", "exact": ["CFTR"], "cited_pmids": pmids_in(m)[:1]},
        retrieve={"ranking": [1, 2, 3, 4, 5, 6, 7, 8]},
    )


async def organized(make_context, settings, strategy: str, model=None, n: int = 8):
    chosen = changed(settings, "organize.strategy", strategy)
    state = {"question": QUESTION, "qtype": "factoid", "contexts": passages(n)}
    model = model or organizer()
    update = await organize(state, Runtime(context=make_context(model, settings_=chosen)))
    return update, model


async def corg_relations(make_context, settings):
    update, _ = await organized(make_context, settings, "corg")
    return "graph" if update["relation_graph"]["calls"] > 0 else "none"


async def retrieve_top(make_context, settings):
    update, _ = await organized(make_context, settings, "retrieve")
    return len(update["organized"])


async def corg_groups(make_context, settings):
    update, _ = await organized(make_context, settings, "random")
    return len(update["groups"])


# --- retrieval ---------------------------------------------------------------------------------


class Counting:
    """A search backend that records the most candidates it was asked for."""

    name = "counting"

    def __init__(self):
        self.asked: list[int] = []

    def search(self, query: str, limit: int) -> SearchResult:
        self.asked.append(limit)
        return SearchResult(total=0)


async def max_candidates(make_context, settings):
    ctx = make_context(script(), settings_=settings)
    backend = Counting()
    ctx = Context(settings=ctx.settings, search=backend, embedder=ctx.embedder, models=ctx.models)
    await search({"query": "cystic AND fibrosis"}, Runtime(context=ctx))
    return one(set(backend.asked))


async def min_hits(make_context, settings):
    bounds = limits(make_context(script(), settings_=settings))
    refined = [
        h for h in range(50) if needs_refinement({"hits": h, "limits": bounds}) == "refine_query"
    ]
    return max(refined) + 1


@pytest.fixture(scope="module")
def big_index(tmp_path_factory) -> EmbeddedIndex:
    """A real embedded index of 320 passages with hash vectors: more than rerank keeps."""
    docs = [{**p, "year": 2020} for p in passages(320)]
    vectors = HashEmbedder().embed_documents([f"{d['title']}. {d['abstract']}" for d in docs])
    return EmbeddedIndex.build(
        tmp_path_factory.mktemp("big") / "index", docs, vectors=vectors, embedding_model="hash-64"
    )


async def reranked(make_context, settings, index) -> dict[str, Any]:
    ctx = make_context(script(), settings_=settings)
    ctx = Context(settings=ctx.settings, search=index, embedder=ctx.embedder, models=ctx.models)
    candidates = [(p["pmid"], 10.0 - i / 100) for i, p in enumerate(passages(320))]
    return await rerank({"question": QUESTION, "candidates": candidates}, Runtime(context=ctx))


def rerank_top_k(index):
    async def observe(make_context, settings):
        return len((await reranked(make_context, settings, index))["ranked"])

    return observe


def rerank_contexts(index):
    async def observe(make_context, settings):
        sizes = {len((await reranked(make_context, settings, index))["contexts"])}
        # CoBag's pool is what rerank passes on, so CoBag draws from the same 20.
        bag = changed(settings, "ensemble.cobag.pool", 100)
        ctx = make_context(script(), settings_=bag)
        contexts = (await reranked(make_context, settings, index))["contexts"]
        drawn = await ENSEMBLE["cobag"].plan(
            ctx, QUESTION, contexts, ctx.models.role("ensemble"), SEED
        )
        sizes.add(len(drawn.contexts))
        return one(sizes)

    return observe


# --- synthesis ---------------------------------------------------------------------------------

SYNTHESIS_PASSAGES = [
    {
        "pmid": "103",
        "title": "Sodium channels in the airway",
        "abstract": "ENaC hyperactivity dehydrates the airway surface in cystic fibrosis.",
        "score": 0.7,
    }
]


def synthesis_state(contexts=None) -> dict[str, Any]:
    return {
        "question": QUESTION,
        "qtype": "factoid",
        "organized": contexts or [dict(p) for p in SYNTHESIS_PASSAGES],
        "decision": {
            "strategy": "permute_vote",
            "answers": [{"answer": "ENaC", "support": 5.0, "cited": ["103"]}],
            "order": ["103"],
            "why": "5 of 5 members",
            "settings": {},
            "source": "ensemble",
            "share": 1.0,
        },
        "attempts": [],
    }


def synthesis_reply(confidence: float) -> dict[str, Any]:
    return {
        "exact_answer": ["ENaC"],
        "ideal_answer": "ENaC hyperactivity dehydrates the airway surface in cystic fibrosis.",
        "confidence": confidence,
        "cited_pmids": ["103"],
    }


async def synthesis_rounds(make_context, settings, confidence: float) -> list[dict[str, Any]]:
    """Run synthesize as the graph does (again while the router says so); return each call's
    arguments (the cache off: a repeated greedy call must reach the model)."""
    settings = changed(settings, "models.cache", "off")
    model = script(synthesize=synthesis_reply(confidence))
    ctx = make_context(model, settings_=settings)
    state = synthesis_state() | {"limits": limits(ctx)}
    for _ in range(8):
        update = await synthesize(state, Runtime(context=ctx))
        state = state | {"answer": update["answer"]}
        state["attempts"] = [*state["attempts"], *update["attempts"]]
        if not needs_resynthesis(state):
            break
    return [c["kwargs"] for c in model.calls]


async def synthesis_mode(make_context, settings):
    asked = await synthesis_rounds(make_context, settings, 0.9)
    return "llm" if asked else "vote"


async def synthesis_temperature(make_context, settings):
    return (await synthesis_rounds(make_context, settings, 0.9))[0]["temperature"]


async def min_confidence(make_context, settings):
    bounds = limits(make_context(script(), settings_=settings))
    again = [
        c / 100
        for c in range(101)
        if needs_resynthesis(
            {
                "limits": bounds,
                "attempts": [{"round": 0}],
                "answer": {"model_confidence": c / 100, "source": "synthesis"},
            }
        )
    ]
    return round(max(again) + 0.01, 2)


async def max_attempts(make_context, settings):
    return len(await synthesis_rounds(make_context, settings, 0.1))


# --- the values the code holds ---------------------------------------------------------------


async def moi_orders_per_passage(make_context, settings):
    n = settings.ensemble.contexts
    return len(moi_fit(await moi_plan(make_context, settings))["permutations"]) / n


async def retry_temperature(make_context, settings):
    return (await synthesis_rounds(make_context, settings, 0.1))[1]["temperature"]


async def greedy(make_context, settings, strategy: str, qtype: str = "factoid") -> float:
    """Return the temperatures the strategy's members were asked at, through the node."""
    chosen = changed(settings, "ensemble.strategy", strategy)
    model = script(ensemble={"answer": "CFTR", "pmids": [], "passage": 1, "quote": "Study"})
    likelihood = Likelihoods(12) if strategy == "moi" else None
    ctx = make_context(model, settings_=chosen)
    if likelihood is not None:
        found = await moi_plan(make_context, chosen, model=likelihood)
        return one({v.temperature for v in found.views})
    state = {"question": QUESTION, "qtype": qtype, "organized": passages(20)}
    await ensemble(state, Runtime(context=ctx))
    return one({c["kwargs"].get("temperature") for c in model.calls})


def greedy_members(*strategies: str):
    async def observe(make_context, settings):
        return one({await greedy(make_context, settings, s) for s in strategies})

    return observe


async def cobag_tie(make_context, settings):
    # Four bags, two answers each: the answer of the bag of highest mean relevance must win,
    # where the plain majority's rule (best rank, then the name) picks the other.
    chosen = changed(changed(settings, "ensemble.strategy", "cobag"), "ensemble.cobag.members", 4)
    contexts = passages(30)
    seed = question_seed(chosen.ensemble.seed, QUESTION)
    ctx = make_context(script(), settings_=chosen)
    found = await ENSEMBLE["cobag"].plan(ctx, QUESTION, contexts, ctx.models.role("ensemble"), seed)
    scores = relevance(contexts[: len(found.contexts)])
    means = [float(np.mean([scores[i] for i in v.order])) for v in found.views]
    best = {tuple(found.views[k].order) for k in np.argsort(means)[-2:]}
    pmid_of = {p["pmid"]: i for i, p in enumerate(contexts)}

    def reply(messages, kwargs):
        view = tuple(pmid_of[p] for p in pmids_in(messages))
        return {"answer": "zeta" if view in best else "alpha", "pmids": []}

    state = {"question": QUESTION, "qtype": "factoid", "organized": contexts}
    update = await ensemble(
        state, Runtime(context=make_context(script(ensemble=reply), settings_=chosen))
    )
    first = update["decision"]["answers"][0]["answer"]
    return {"zeta": "the most relevant view", "alpha": "best rank, then the name"}[first]


async def ccv_tie(make_context, settings):
    order = ("a", "b", "c")
    members = [
        CitedAnswer("x", 1, None, order),
        CitedAnswer("x", 1, None, order),
        CitedAnswer("y", 2, None, order),
        CitedAnswer("y", 2, None, order),
        CitedAnswer("y", 3, None, order),
    ]
    # x: 2 citations of a; y: 2 of b (its modal document), 1 of c: a tie, y the more frequent.
    winner = ccv_select(members, {}, strict=False)["winner"]
    return {"y": "raw answer frequency", "x": "first seen"}[winner]


async def corg_plural(make_context, settings):
    # Two contexts, unrelated: one group of both, asked in plural form.
    update, _ = await organized(make_context, settings, "corg", n=2)
    (group,) = update["groups"]
    return "plural" if group["question"] != QUESTION else "as asked"


# --- the probes, by setting and by value held ------------------------------------------------


def setting_probes(index) -> dict[str, Probe]:
    return {
        "ensemble.cobag.members": Probe(cobag_members, 3),
        "ensemble.cobag.contexts": Probe(cobag_contexts, 8),
        "ensemble.cobag.core": Probe(cobag_core, 3),
        "ensemble.cobag.tau": Probe(reproduced_by("tau", (1.0, 0.05)), 0.05),
        "ensemble.cobag.pool": Probe(cobag_pool, 25),
        "ensemble.cobag.shuffle": Probe(cobag_shuffle, False),
        "ensemble.cobag.sampling": Probe(
            reproduced_by("sampling", ("relevance", "uniform")), "uniform"
        ),
        "ensemble.members": Probe(members_k, 3),
        "ensemble.contexts": Probe(contexts_m, 8),
        "ensemble.sample_temperature": Probe(sample_temperature, 0.7),
        "rerank.contexts": Probe(rerank_contexts(index), 15),
        "ensemble.ccv.members": Probe(ccv_members, 10),
        "ensemble.ccv.contexts": Probe(ccv_contexts, 4),
        "ensemble.ccv.vote": Probe(ccv_vote, "answer_count"),
        "ensemble.ccv.evidence": Probe(ccv_evidence, "strict"),
        "ensemble.moi.permutations": Probe(moi_permutations, "cyclic"),
        "ensemble.moi.observation": Probe(moi_observation, "question"),
        "ensemble.moi.weights": Probe(moi_weights, "flat"),
        "ensemble.moi.order": Probe(moi_order, "paired"),
        "organize.corg_relations": Probe(corg_relations, "none"),
        "organize.retrieve_top": Probe(retrieve_top, 3),
        "organize.groups": Probe(corg_groups, 2),
        "search.max_candidates": Probe(max_candidates, 500),
        "search.min_hits": Probe(min_hits, 3),
        "rerank.top_k": Probe(rerank_top_k(index), 250),
        "synthesis.mode": Probe(synthesis_mode, "vote"),
        "synthesis.temperature": Probe(synthesis_temperature, 0.3),
        "synthesis.min_confidence": Probe(min_confidence, 0.7),
        "synthesis.max_attempts": Probe(max_attempts, 3),
    }


HELD_PROBES: dict[str, Callable[[Any, Settings], Awaitable[Any]]] = {
    "moi-3n": moi_orders_per_passage,
    "retry-t0": retry_temperature,
    "cobag-greedy": greedy_members("single", "permute_vote", "cobag"),
    "ccv-greedy": greedy_members("ccv"),
    "moi-greedy": greedy_members("moi"),
    "cobag-tie": cobag_tie,
    "ccv-tie": ccv_tie,
    "corg-plural": corg_plural,
}


@pytest.fixture
def shipped(monkeypatch, tmp_path: Path) -> Settings:
    """Settings as shipped (no QUORUM_* variable, no file), rooted in tmp_path, no fallback."""
    for name in list(os.environ):
        if name.startswith("QUORUM_"):
            monkeypatch.delenv(name)
    return load_settings(home=tmp_path / "home", fallback={"enabled": False})


def where(row: dict[str, str]) -> str:
    return f"{row['paper']} {row['section']}"


@pytest.mark.parametrize(
    "row", DEFAULTS, ids=lambda r: f"{r['setting']}@{r['paper']} {r['section']}"
)
async def test_the_code_does_what_the_papers_default_says(row, make_context, shipped, big_index):
    probe = setting_probes(big_index)[row["setting"]]
    value = json.loads(row["value"])
    observed = await probe.observe(make_context, shipped)
    assert observed == value, (
        f"{row['setting']}: the code acts as if it were {observed!r}, where {where(row)} sets "
        f"{value!r} (docs/methods.md): a default changed, or a value written in the code"
    )


@pytest.mark.parametrize(
    "row", DEFAULTS, ids=lambda r: f"{r['setting']}@{r['paper']} {r['section']}"
)
async def test_the_code_reads_the_setting(row, make_context, shipped, big_index):
    probe = setting_probes(big_index)[row["setting"]]
    assert probe.other != json.loads(row["value"])
    observed = await probe.observe(make_context, changed(shipped, row["setting"], probe.other))
    assert observed == probe.other, (
        f"{row['setting']} set to {probe.other!r} left the code acting as {observed!r}: the "
        f"code ignores the setting that holds {where(row)}'s value"
    )


@pytest.mark.parametrize("row", HELD, ids=lambda r: f"{r['id']}@{r['paper']} {r['section']}")
async def test_the_code_holds_the_papers_value(row, make_context, shipped):
    observed = await HELD_PROBES[row["id"]](make_context, shipped)
    value = json.loads(row["value"]) if row["value"][:1] in "0123456789-" else row["value"]
    assert observed == value, (
        f"{row['what']}: the code acts as {observed!r}, where {where(row)} holds {value!r} "
        f"(docs/methods.md, the table held in the code; {row['where']})"
    )


def test_every_default_and_every_value_held_has_a_probe(tmp_path):
    assert {r["setting"] for r in DEFAULTS} == set(setting_probes(None))
    assert [r["id"] for r in HELD] == list(HELD_PROBES)
    for row in HELD:
        assert row["paper"].endswith(".txt") and row["section"].startswith(("§", "App."))
