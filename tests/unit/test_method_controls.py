"""Each ensemble method against its control: a check the method passes and the control fails.

Issue 26: a method is worth its cost only if its mechanism matters. For each one a planted
case is built so that it must; the method passes a check there, and the same check, at the
same cost (same K, same m, the same views or observations), rejects the method with that
mechanism removed by its setting. The checks are the same function for both sides, so a
control that passed would fail the test: these proofs can fail.

- CCV (citation-consistent-voting.txt §3.3) vs `ccv.vote = "answer_count"`, the paper's MoA
  majority vote over the same cited answers.
- MoI (mixture-of-intervention.txt §3.1) vs `moi.weights = "flat"`: no position weights fitted.
- CoBag (context-bagging.txt §3.3, Table 2) vs CoBag-NoShuffle (`cobag.shuffle = false`) and
  CoBag-Uniform (`cobag.sampling = "uniform"`).
- permute_vote vs K = 1, which is single.
"""

from __future__ import annotations

import math

from langgraph.runtime import Runtime

from infra.models import ModelPool
from infra.settings import ModelSpec
from lab.simulate.reader import ReaderSettings, position_curve
from lab.simulate.server import SimulatedEndpoint
from nodes.context import Context
from nodes.ensemble import ensemble
from nodes.ensemble.strategies import cobag_views
from tests.support.fakes import pmids_in, script
from tests.support.reader import EXACT_READER

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"
PMIDS = ["101", "102", "103", "105", "104", "106", "107", "108"]


def with_ensemble(settings, **changes):
    groups = {k: changes.pop(k) for k in ("cobag", "ccv", "moi") if k in changes}
    chosen = settings.ensemble.model_copy(update=changes)
    for name, values in groups.items():
        chosen = chosen.model_copy(
            update={name: getattr(settings.ensemble, name).model_copy(update=values)}
        )
    return settings.model_copy(update={"ensemble": chosen})


async def run(make_context, settings, model, state, **changes):
    ctx = make_context(model, settings_=with_ensemble(settings, **changes))
    return await ensemble(state, Runtime(context=ctx))


def first_answer(update) -> str:
    return update["decision"]["answers"][0]["answer"]


def answers_yes(update) -> bool:
    """The check of the yes/no cases below, whose planted right answer is yes."""
    return first_answer(update) == "yes"


def views_of(update) -> list[list[str]]:
    """Return the member views by view number: what a run paid for."""
    return [m["order"] for m in sorted(update["members"], key=lambda m: m["view"])]


# --- CCV: citations that agree beat answers that are merely frequent ------------------------

RIGHT, WRONG = "ENaC", "CFTR"
# Three members give the wrong answer, each citing another abstract; two give the right one and
# both cite PMID 102, wherever their permutation put it (§3.3: the citation is mapped to a
# document id, so agreement survives the shuffles).
CITED = [(WRONG, "101"), (WRONG, "103"), (WRONG, "105"), (RIGHT, "102"), (RIGHT, "102")]


def citing_members():
    plan = iter(CITED)

    def reply(messages, kwargs):
        answer, pmid = next(plan)
        return {"answer": answer, "passage": pmids_in(messages).index(pmid) + 1, "quote": "q"}

    return script(ensemble=reply)


async def test_ccv_picks_the_consistently_cited_answer_and_answer_count_does_not(
    make_context, settings, index
):
    state = {"question": QUESTION, "qtype": "factoid", "organized": index.fetch(PMIDS)}
    runs = {}
    for vote in ("citation", "answer_count"):
        ccv = {"members": 5, "contexts": 5, "vote": vote, "evidence": "relaxed"}
        runs[vote] = await run(
            make_context, settings, citing_members(), state, strategy="ccv", ccv=ccv
        )
    method, control = runs["citation"], runs["answer_count"]
    # Equal cost: the same K cited calls over the same N = 5 permutations.
    assert views_of(method) == views_of(control) and len(views_of(method)) == 5
    assert {len(v) for v in views_of(method)} == {5}

    def picks_the_right_answer(update) -> bool:
        return first_answer(update) == RIGHT

    assert picks_the_right_answer(method)
    assert not picks_the_right_answer(control)
    assert method["decision"]["settings"]["vote"] == "citation"
    assert control["decision"]["settings"]["vote"] == "answer_count"
    assert f"citation vote would pick {RIGHT!r}" in control["votes"]["ccv"]


# --- MoI: the gold passage read badly at its rank position ----------------------------------

GOLD = "Washington, D.C."
MOI_QUESTION = "where is the white house"
# pmid, role, planted answer, text, the retriever's score (ranks gold second; the reranker put
# it last, where a primacy reader barely reads it).
MOI_PASSAGES = [
    ("d1", "distractor", "New York", "A White House replica stands in New York, at a fair.", 0.9),
    ("i1", "irrelevant", None, "Pennsylvania is a state in the north east.", 0.3),
    ("d2", "distractor", "Dublin", "The White House design copies Leinster House in Dublin.", 0.7),
    ("i2", "irrelevant", None, "Houses are often painted white in the south.", 0.25),
    ("i3", "irrelevant", None, "Avenues are wide streets lined with trees.", 0.1),
    ("g", "gold", None, f"The White House stands in {GOLD}, on Pennsylvania Avenue.", 0.82),
]
# A steep primacy curve, exact log-likelihoods (MoI's linear model, Eq. 4), greedy readings
# with no citation mistakes.
READER = EXACT_READER | {"curve": "primacy", "strength": 0.9}
UTILITY = {"gold": 1.0, "distractor": READER["distractor_strength"]}


def moi_plants() -> list[dict]:
    items = []
    for pmid, role, answer, text, _ in MOI_PASSAGES:
        item = {"pmid": pmid, "role": role, "title": f"Passage {pmid}", "text": text}
        items.append(item | ({"answer": answer} if answer else {}))
    return [{"id": "wh", "question": MOI_QUESTION, "answer": GOLD, "passages": items}]


def moi_context(settings, embedder, url: str, weights: str) -> Context:
    spec = ModelSpec(provider="openai", model="reader", base_url=url, prompt_logprobs=True)
    moi = settings.ensemble.moi.model_copy(
        update={"weights": weights, "order": "descending", "permutations": "random"}
    )
    chosen_ensemble = settings.ensemble.model_copy(
        update={"strategy": "moi", "contexts": 6, "moi": moi}
    )
    models = settings.models.model_copy(update={"query": spec, "ensemble": [spec]})
    chosen = settings.model_copy(update={"models": models, "ensemble": chosen_ensemble})
    return Context(settings=chosen, search=None, embedder=embedder, models=ModelPool(chosen))


def reading_weights(order: list[str]) -> dict[str, float]:
    """Return what the planted reader weighs each passage at in this order: utility × curve."""
    role = {p[0]: p[1] for p in MOI_PASSAGES}
    curve = position_curve(READER["curve"], READER["strength"], len(order))
    irrelevant = READER["irrelevant_utility"]
    return {p: UTILITY.get(role[p], irrelevant) * c for p, c in zip(order, curve, strict=True)}


async def test_moi_reads_the_gold_passage_first_and_flat_weights_do_not(settings, embedder):
    contexts = [
        {"pmid": p, "title": f"Passage {p}", "abstract": text, "score": score}
        for p, _, _, text, score in MOI_PASSAGES
    ]
    state = {"question": MOI_QUESTION, "qtype": "factoid", "organized": contexts}
    runs = {}
    reader = ReaderSettings(**READER)
    for weights in ("fitted", "flat"):
        with SimulatedEndpoint(0.0, planted=moi_plants(), reader=reader) as endpoint:
            ctx = moi_context(settings, embedder, endpoint.base_url, weights)
            runs[weights] = await ensemble(state, Runtime(context=ctx))
    method, control = runs["fitted"], runs["flat"]
    (fit,), (flat,) = method["votes"]["moi"].values(), control["votes"]["moi"].values()
    # Equal cost: the same 3N orders observed, the same observations, one answer each.
    assert fit["permutations"] == flat["permutations"] and len(fit["permutations"]) == 18
    assert fit["observations"] == flat["observations"]
    assert len(method["members"]) == len(control["members"]) == 1

    def recovers_the_utility_order(moi_fit) -> bool:
        utility = moi_fit["utilities"]
        return all(utility["g"] > utility[p] for p in utility if p != "g")

    def the_reader_most_likely_reads_gold(update) -> bool:
        weight = reading_weights(update["members"][0]["order"])
        return max(weight, key=weight.__getitem__) == "g"

    assert recovers_the_utility_order(fit)
    assert the_reader_most_likely_reads_gold(method)
    assert not recovers_the_utility_order(flat)
    assert not the_reader_most_likely_reads_gold(control)
    assert control["members"][0]["order"] == [p[0] for p in MOI_PASSAGES]  # the rank order
    assert method["decision"]["settings"]["weights"] == "fitted"
    assert control["decision"]["settings"]["weights"] == "flat"
    assert any("flat position weights" in n for n in control["notes"])


# --- CoBag: order shuffling (NoShuffle) -----------------------------------------------------

DISTRACTOR = "216"


def bag_contexts() -> list[dict]:
    """Return 16 contexts in rank order; the hard distractor last, as the paper places it.

    context-bagging.txt §4.1: the hard distractor ranks in the top r by relevance (so it is in
    every view's core) and stands at the end of the sequence, the worst case for recency. Its
    text is the question's own words, so the hash embedder gives it the highest relevance.
    """
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    contexts = [
        {
            "pmid": str(201 + k),
            "title": "",
            "abstract": f"Mitochondria {words[k % 8]} {words[(3 * k + 1) % 8]} study {k}.",
            "score": 1.0 - k / 20,
        }
        for k in range(15)
    ]
    return [*contexts, {"pmid": DISTRACTOR, "title": "", "abstract": QUESTION, "score": 0.25}]


def recency_members():
    """Members that answer from the last passage shown: the distractor there misleads them."""

    def reply(messages, kwargs):
        last = pmids_in(messages)[-1]
        return {"answer": "no" if last == DISTRACTOR else "yes", "pmids": [last]}

    return script(ensemble=reply)


async def test_cobag_outvotes_a_hard_distractor_at_the_end_and_noshuffle_does_not(
    make_context, settings
):
    state = {"question": QUESTION, "qtype": "yesno", "organized": bag_contexts()}
    runs = {}
    for shuffle in (True, False):
        bag = {
            "members": 5,
            "contexts": 12,
            "core": 6,
            "pool": 20,
            "tau": 1.0,
            "sampling": "relevance",
            "shuffle": shuffle,
        }
        runs[shuffle] = await run(
            make_context, settings, recency_members(), state, strategy="cobag", cobag=bag
        )
    method, control = runs[True], runs[False]
    # Equal cost and the same bags: K = 5 views of m = 12, holding the same contexts.
    assert [set(v) for v in views_of(method)] == [set(v) for v in views_of(control)]
    assert len(views_of(method)) == 5 and {len(v) for v in views_of(method)} == {12}
    assert all(DISTRACTOR in v for v in views_of(method))  # in the core, as planted

    def distractor_rarely_last(update) -> bool:
        """The hard distractor holds the most-read position in no majority of views."""
        views = views_of(update)
        return sum(v[-1] == DISTRACTOR for v in views) <= len(views) // 2

    assert distractor_rarely_last(method) and answers_yes(method)
    assert not distractor_rarely_last(control) and not answers_yes(control)
    rank = {c["pmid"]: k for k, c in enumerate(bag_contexts())}
    assert all(v == sorted(v, key=rank.__getitem__) for v in views_of(control))  # rank order
    assert method["decision"]["settings"]["shuffle"] is True
    assert control["decision"]["settings"]["shuffle"] is False
    assert any("CoBag-NoShuffle" in n for n in control["notes"])


# --- CoBag: relevance-weighted sampling (Uniform) -------------------------------------------

CORE, RELEVANT, OTHER = 6, 7, 7
# The paper's m = 12, r = 6, τ = 1 over 20 paragraphs (§4.1); cosines as an embedder gives
# them: a core at 0.8-0.9, then seven relevant paragraphs at 0.6 and seven others at 0.2.
BAG_RELEVANCE = [0.9 - 0.02 * k for k in range(CORE)] + [0.6] * RELEVANT + [0.2] * OTHER


def relevant_share(sampling: str, seeds: int = 200) -> tuple[float, int]:
    """Return the share of non-core draws that are relevant, over K = 5 views per seed."""
    relevant = set(range(CORE, CORE + RELEVANT))
    hits = draws = 0
    for seed in range(seeds):
        for view in cobag_views(
            BAG_RELEVANCE, members=5, size=12, core=CORE, tau=1.0, seed=seed, sampling=sampling
        ):
            drawn = [i for i in view if i >= CORE]
            hits += sum(i in relevant for i in drawn)
            draws += len(drawn)
    return hits / draws, draws


def test_cobag_draws_relevant_contexts_more_often_and_uniform_sampling_does_not():
    def favours_relevance(share: float, draws: int) -> bool:
        """Relevant contexts are half the non-core pool: drawn more than 3 standard errors
        above half of the time (one-sided), as exp(s/τ) weighting must draw them."""
        return share > 0.5 + 3 * math.sqrt(0.25 / draws)

    method, control = relevant_share("relevance"), relevant_share("uniform")
    assert method[1] == control[1] == 200 * 5 * (12 - CORE)  # the same number of draws
    assert favours_relevance(*method)
    assert not favours_relevance(*control)
    # The core is the method's and the control's alike: only the draws differ.
    views = cobag_views(BAG_RELEVANCE, members=5, size=12, core=CORE, tau=1.0, seed=0)
    uniform = cobag_views(
        BAG_RELEVANCE, members=5, size=12, core=CORE, tau=1.0, seed=0, sampling="uniform"
    )
    assert all(set(range(CORE)) <= set(v) for v in (*views, *uniform))


# --- permute_vote: K orders; K = 1 is single ------------------------------------------------


def primacy_members():
    """Members that answer from the first passage shown; the rank order opens on a distractor."""

    def reply(messages, kwargs):
        first = pmids_in(messages)[0]
        return {"answer": "no" if first == PMIDS[0] else "yes", "pmids": [first]}

    return script(ensemble=reply)


async def test_permute_vote_outvotes_the_first_position_and_one_order_is_single(
    make_context, settings, index
):
    state = {"question": QUESTION, "qtype": "yesno", "organized": index.fetch(PMIDS)}

    async def ask(**changes):
        return await run(make_context, settings, primacy_members(), state, contexts=8, **changes)

    method = await ask(strategy="permute_vote", members=5)
    control = await ask(strategy="permute_vote", members=1)
    single = await ask(strategy="single")
    assert answers_yes(method)
    assert not answers_yes(control)
    # K = 1 shows the rank order once: single's one view and single's decision.
    assert views_of(control) == views_of(single) == [PMIDS]
    for key in ("answers", "order"):
        assert control["decision"][key] == single["decision"][key]
    k = [u["decision"]["settings"]["members"] for u in (method, control, single)]
    assert k == [5, 1, 1]
