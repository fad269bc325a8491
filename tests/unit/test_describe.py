"""The graph described for people: labels for exactly its nodes, one vocabulary everywhere."""

import pytest

from graphs.describe import (
    LABELS,
    done_line,
    node_names,
    summarize,
    trace_text,
)
from graphs.qa import build_graph
from graphs.runtime import graph_nodes
from infra.bioasq.types import PHASES
from nodes.describing import plural


@pytest.mark.parametrize("phase", PHASES)
def test_every_node_of_every_phase_has_a_label(phase):
    compiled = {n for n in build_graph(phase=phase).nodes if not n.startswith("__")}
    assert set(graph_nodes(phase)) == compiled
    assert compiled <= set(LABELS)


def test_labels_name_exactly_the_graphs_nodes():
    every = {n for phase in PHASES for n in graph_nodes(phase)}
    assert set(LABELS) == set(node_names()) == every


@pytest.mark.parametrize("node", sorted(LABELS))
def test_every_node_says_what_it_did_in_its_own_words(node):
    line = done_line(node, {})
    assert line and line != node


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "0 hits"), (1, "1 hit"), (2, "2 hits"), (8412, "8,412 hits")]
)
def test_plurals_agree_with_their_count(count, expected):
    assert plural(count, "hit") == expected


def test_done_lines_count_in_the_right_number():
    assert done_line("search", {"hits": 1}) == "searched: 1 hit"
    assert done_line("search", {"hits": 8412}) == "searched: 8,412 hits"
    assert done_line("organize", {"organized": [{}] * 4, "groups": [{}] * 1}) == (
        "organized 4 contexts into 1 group"
    )
    one = {"members": [{"error": None, "answer": ["yes"]}], "votes": {"members": 1, "agreement": 1}}
    assert done_line("ensemble", one) == ("ensemble: 1 answer, agreement 1.00")
    assert done_line("fallback_search", {"fallbacks": [{"added": 3}]}) == (
        "searched PubMed: 3 documents added"
    )


def test_summaries_give_the_details_behind_a_line():
    assert summarize("search", {"hits": 8412}) == "8,412 hits"
    assert summarize("synthesize", {"answer": {"confidence": 0.876}}) == "confidence 0.88"
    assert summarize("fallback_search", {"notes": ["PubMed unreachable"]}) == "PubMed unreachable"


def test_a_ccv_vote_left_to_the_majority_is_described_not_a_crash():
    votes = {"strategy": "ccv", "ranked": ["a", "b"], "table": [], "ccv": "list answers are voted"}
    lines = trace_text("ensemble", {"members": [], "votes": votes})[0]
    assert "citation-consistent vote: not used (list answers are voted)" in lines
    assert lines[-1] == "ranked: a; b"


def test_a_measure_with_no_value_reads_the_same_whether_none_or_nan(capsys):
    from graphs.cli.common import print_report
    from graphs.describe import NO_FIGURE, measure_text

    assert measure_text(None) == measure_text(float("nan")) == NO_FIGURE
    assert measure_text(0.5) == "0.5000" and measure_text(12) == "12"
    print_report({"factoid_mrr": None, "list_f1": float("nan"), "yesno_accuracy": 1.0})
    shown = capsys.readouterr().out
    assert "None" not in shown and "nan" not in shown and shown.count(NO_FIGURE) == 2


def test_every_node_of_every_phase_describes_itself():
    from nodes.describing import DESCRIPTIONS

    for phase in PHASES:
        for node in graph_nodes(phase):
            assert node in DESCRIPTIONS, f"{node} ({phase}) has no description"
            assert DESCRIPTIONS[node].label and DESCRIPTIONS[node].done({})


def test_a_failed_or_skipped_step_is_never_marked_done():
    # Issue 48: "✓ synthesis failed", "✓ PubMed unavailable" told a reader the step went well.
    from graphs.describe import progress_line

    assert progress_line("search", {"hits": 3}) == "✓ searched: 3 hits"
    failed = {"answer": {"failed": "the answer broke the contract", "confidence": 0.0}}
    assert progress_line("synthesize", failed).startswith("✗ synthesis failed, trying again")
    stood_in = {"answer": {"source": "vote", "confidence": 0.3}}
    assert progress_line("synthesize", stood_in).startswith("✗ synthesis failed again")
    given = {"answer": {"source": "synthesis", "confidence": 0.8}}
    assert progress_line("synthesize", given).startswith("✓ synthesized")
    down = {"fallbacks": [{"status": "fallback unavailable: no e-mail", "added": 0}]}
    assert progress_line("fallback_search", down).startswith("– PubMed unavailable")
    found = {"fallbacks": [{"status": "ok", "added": 2}]}
    assert progress_line("fallback_search", found) == "✓ searched PubMed: 2 documents added"
    keywords = {"queries": [{"source": "model", "error": "copied"}, {"source": "keywords"}]}
    assert progress_line("generate_query", keywords).startswith("✗ the model's query failed")


def test_the_retrieval_steps_show_their_queries_hits_and_scores_not_raw_lists():
    """generate_query, search, rerank and fallback_search read as tables in a trace (text and
    HTML draw the same blocks); what the tables show is left out of the raw keys after them."""
    from graphs.describe import step_lines

    proposed = {
        "query": "mitochondria OR lace",
        "queries": [
            {"query": "Do mitochondria matter?", "source": "model", "error": "copied"},
            {"query": "mitochondria OR lace", "source": "keywords", "error": None},
        ],
        "refinements": 0,
    }
    lines = step_lines("generate_query", proposed, width=300)
    assert any("model" in line and "refused: copied" in line for line in lines)
    assert any("keywords" in line and line.rstrip().endswith("used") for line in lines)
    assert not any(line.startswith(("queries:", "query:")) for line in lines)
    assert "refinements: 0" in lines

    searched = {
        "hits": 3,
        "candidates": [["11", 9.5], ["12", 4.25], ["13", 1.0]],
        "searches": [{"query": "q", "hits": 3, "ms": 1.5, "backend": "embedded"}],
    }
    lines = step_lines("search", searched, width=300)
    assert lines[0] == "q → 3 hits in 1.5 ms on embedded"
    assert any(line.split() == ["1", "11", "9.500"] for line in lines)
    assert not any(line.startswith(("candidates:", "hits:")) for line in lines)

    ranked = {"ranked": [["12", 0.9], ["11", 0.2]], "contexts": [{"pmid": "12"}]}
    lines = step_lines("rerank", ranked, width=300)
    assert any(line.split() == ["1", "12", "0.900", "context"] for line in lines)
    assert any(line.split() == ["2", "11", "0.200"] for line in lines)

    asked = {"fallbacks": [{"source": "pubmed-eutils", "query": "q", "added": 0, "status": "off"}]}
    lines = step_lines("fallback_search", asked, width=300)
    assert any(line.split() == ["pubmed-eutils", "q", "0", "off"] for line in lines)
    assert not any(line.startswith("fallbacks:") for line in lines)


def test_refine_query_shows_its_proposals_as_generate_query_does():
    from graphs.describe import step_lines

    relaxed = {
        "query": "lace OR plant",
        "queries": [{"query": "lace AND plant", "source": "refine", "error": "no hits"}],
        "refinements": 1,
    }
    lines = step_lines("refine_query", relaxed, width=300)
    assert any("refine" in line and "refused: no hits" in line for line in lines)
    assert "searching: lace OR plant" in lines and "refinements: 1" in lines


def test_a_run_no_model_answered_does_not_end_with_answer_ready():
    from graphs.describe import progress_line

    failed = {"result": {"failed": True, "insufficient": True, "insufficient_reason": "junk"}}
    answered = {"result": {"failed": False, "insufficient": False}}
    assert progress_line("finalize", failed) == "✗ no model gave a usable answer"
    assert progress_line("finalize", answered) == "✓ answer ready"


def test_a_run_whose_evidence_carries_no_answer_does_not_end_with_answer_ready():
    from graphs.describe import progress_line

    thin = {"result": {"failed": False, "insufficient": True, "insufficient_reason": "refused"}}
    assert progress_line("finalize", thin) == "✗ no answer: the evidence found does not carry one"


def test_an_ensemble_no_member_answered_is_a_failed_step_not_zero_answers():
    from graphs.describe import progress_line

    member = {"error": None, "answer": ["yes"]}
    failed = {"error": "unparseable output", "answer": []}
    votes = {"members": 2, "agreement": 1.0}
    answered = {"members": [member, member, failed], "votes": votes}
    nobody = {"members": [failed, failed], "votes": {"members": 0, "agreement": 0.0}}
    empty = {"members": [], "decision": {"why": "no contexts to answer from", "answers": []}}
    assert progress_line("ensemble", answered) == "✓ ensemble: 2 answers, agreement 1.00"
    assert progress_line("ensemble", nobody) == "✗ ensemble: none of 2 members gave an answer"
    assert progress_line("ensemble", empty) == "– ensemble: no contexts to answer from"
    groups = {"members": [], "decision": {"source": "organize", "answers": [{"answer": "yes"}]}}
    assert progress_line("ensemble", groups) == "✓ ensemble: the group answers decide"


def test_a_node_s_description_is_its_own_module_in_nodes_descriptions_named_as_the_node():
    """One place per node, light enough for a reader of traces: describes("x", …) in x.py."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = {}
    for path in sorted((root / "nodes").rglob("*.py")):
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "describes":
                found[call.args[0].value] = path.relative_to(root).as_posix()
    every = {n for phase in PHASES for n in graph_nodes(phase)}
    assert found == {node: f"nodes/descriptions/{node}.py" for node in every}
