"""A run read back from its SQLite checkpoints, as `quorum trace show` prints it."""

from graphs.describe import trace_text
from graphs.runtime import run_question
from graphs.traces.read import node_updates
from tests.support.fakes import pmids_in, script

QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"


def said(line: str, model: float) -> bool:
    """Tell whether a synthesis line gives the model's own confidence (as its word or alone)."""
    return f"(model said {model:.2f})" in line or f"confidence {model:.2f}," in line


async def test_trace_shows_members_votes_and_the_greedy_resynthesis(make_context, settings):
    answers = iter(["yes", "no", "yes", "yes", "no"])
    model = script(
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=lambda m, kw: {"answer": next(answers), "pmids": pmids_in(m)[:1]},
        synthesize=lambda m, kw: {
            "exact_answer": "yes",
            "ideal_answer": "Mitochondria act early.",
            "confidence": 0.3 if kw.get("temperature") else 0.8,
            "cited_pmids": pmids_in(m)[:1],
            "rationale": "Two of three readers and the first abstract agree.",
        },
    )
    thread, result = await run_question(settings, QUESTION, context=make_context(model))
    steps = node_updates(settings, thread)
    shown = {}
    for step in steps:
        lines, _ = trace_text(step["node"], step["update"])
        if lines:
            shown.setdefault(step["node"], []).append(lines)
    (ensemble,) = shown["ensemble"]
    assert ensemble[0].startswith("strategy permute_vote: 5 member call(s), agreement 0.60")
    at = ensemble.index("members:")
    assert ensemble[at + 1].split() == [
        "model",
        "view",
        "order",
        "t",
        "answer",
        "cites",
        "error",
        "latency",
        "s",
        "tokens",
    ]
    member_lines = [line for line in ensemble[at + 2 : at + 7] if line.startswith("  scripted ")]
    assert len(member_lines) == 5
    at = ensemble.index("vote table:")
    assert [line.split()[:2] for line in ensemble[at + 2 : at + 4]] == [["yes", "3"], ["no", "2"]]
    # The decision synthesis read, with every setting of the strategy that made it.
    decided = "decision (permute_vote, by ensemble): 3 of 5 members answered 'yes' (majority vote)"
    assert decided in ensemble
    assert any(line.startswith("settings: models=['scripted'], seed=13") for line in ensemble)
    first, second = shown["synthesize"]  # low confidence, so a second, greedy attempt
    # The first attempt judged each passage's relevance: its table leads, before the attempt.
    assert first[0] == "relevance: 5 of 5 passages address the question (only they are evidence):"
    # The model's own confidence drives the gate; the trace shows it beside the evidence's.
    (tried,) = [line for line in first if line.startswith("attempt in round")]
    (again,) = [line for line in second if line.startswith("attempt in round")]
    assert "temperature 0.1" in tried and said(tried, 0.30)
    assert "(again, at temperature 0)" in again and said(again, 0.80)
    assert "  rationale: Two of three readers and the first abstract agree." in second
    assert result["exact_answer"] == "yes"
