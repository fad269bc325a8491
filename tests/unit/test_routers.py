from graphs.routers import (
    after_fallback,
    after_synthesis,
    fallback_wanted,
    needs_fallback,
    needs_refinement,
    needs_resynthesis,
)
from tests.support.data import LIMITS

CONTEXTS = [{"pmid": "1"}, {"pmid": "2"}]


def state(**values):
    return {"question": "q?", "qtype": "yesno", "limits": dict(LIMITS), **values}


def attempt(round_=0, temperature=0.3):
    return {"round": round_, "temperature": temperature, "answer": {}, "error": None}


def test_refine_when_fewer_hits_than_the_minimum():
    assert needs_refinement(state(hits=4, refinements=0)) == "refine_query"


def test_no_refinement_at_the_minimum():
    assert needs_refinement(state(hits=5, refinements=0)) == "rerank"


def test_refinement_is_bounded():
    assert needs_refinement(state(hits=0, refinements=1)) == "refine_query"
    assert needs_refinement(state(hits=0, refinements=2)) == "rerank"


def test_refinement_off_when_max_is_zero():
    s = state(hits=0, refinements=0)
    s["limits"]["max_refinements"] = 0
    assert needs_refinement(s) == "rerank"


def test_resynthesis_when_confidence_below_gate():
    s = state(organized=CONTEXTS, answer={"confidence": 0.49}, attempts=[attempt()])
    assert needs_resynthesis(s)
    assert after_synthesis(s) == "synthesize"


def test_no_resynthesis_at_the_gate():
    s = state(organized=CONTEXTS, answer={"confidence": 0.5}, attempts=[attempt()])
    assert not needs_resynthesis(s)
    assert after_synthesis(s) == "finalize"


def test_resynthesis_bounded_per_evidence_round():
    two = [attempt(0, 0.3), attempt(0, 0.0)]
    s = state(organized=CONTEXTS, answer={"confidence": 0.1}, attempts=two, fallbacks=[])
    assert not needs_resynthesis(s)
    # after a fallback round, attempts of the new round start from zero again
    s = state(
        organized=CONTEXTS, answer={"confidence": 0.1}, attempts=two, fallbacks=[{"added": 3}]
    )
    assert needs_resynthesis(s)


def test_fallback_when_low_confidence_after_attempts():
    s = state(organized=CONTEXTS, answer={"confidence": 0.2}, attempts=[attempt(), attempt(0, 0.0)])
    assert fallback_wanted(s)
    assert needs_fallback(s)
    assert after_synthesis(s) == "fallback_search"


def test_fallback_when_no_contexts_even_if_confident():
    s = state(organized=[], contexts=[], answer={"confidence": 0.9}, attempts=[attempt()])
    assert fallback_wanted(s)
    assert after_synthesis(s) == "fallback_search"


def test_fallback_bounded():
    s = state(
        organized=CONTEXTS,
        answer={"confidence": 0.2},
        attempts=[attempt(0), attempt(0, 0.0), attempt(1), attempt(1, 0.0)],
        fallbacks=[{"added": 2}],
    )
    assert not needs_fallback(s)
    assert after_synthesis(s) == "finalize"


def test_fallback_disabled():
    s = state(organized=CONTEXTS, answer={"confidence": 0.2}, attempts=[attempt(), attempt(0, 0.0)])
    s["limits"]["max_fallbacks"] = 0
    assert after_synthesis(s) == "finalize"


def test_sufficient_evidence_finishes():
    s = state(organized=CONTEXTS, answer={"confidence": 0.8}, attempts=[attempt()])
    assert not fallback_wanted(s)
    assert after_synthesis(s) == "finalize"


def test_after_fallback_reranks_only_with_new_documents():
    assert after_fallback(state(fallbacks=[{"added": 3}])) == "rerank"
    assert (
        after_fallback(state(fallbacks=[{"added": 0, "status": "fallback unavailable"}]))
        == "finalize"
    )


async def test_phase_b_never_falls_back_as_given_evidence_bounds_it_and_its_graph_has_no_fallback(
    tmp_path,
):
    from langgraph.runtime import Runtime

    from graphs.qa import build_graph
    from infra.settings import load_settings
    from nodes.context import Context
    from nodes.generate_query import limits
    from nodes.given_evidence import given_evidence

    searching = load_settings(home=tmp_path, fallback={"enabled": True, "email": "a@b.org"})
    context = Context(settings=searching, search=None, embedder=None, models=None)
    update = await given_evidence({"question": "Is it?", "given": {}}, Runtime(context=context))
    insufficient = {"contexts": [], "answer": {"confidence": 0.0, "source": "insufficient"}}
    assert after_synthesis({**insufficient, "limits": limits(context)}) == "fallback_search"
    assert after_synthesis({**insufficient, "limits": update["limits"]}) == "finalize"
    wired = build_graph(phase="B").get_graph()
    assert "fallback_search" not in wired.nodes
    assert {e.target for e in wired.edges if e.source == "synthesize"} == {"synthesize", "finalize"}
