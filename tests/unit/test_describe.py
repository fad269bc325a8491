"""The graph described for people: labels, order and next nodes read from the compiled graph."""

import pytest

from graphs.chat.terminal import status_after
from graphs.describe import (
    DONE,
    LABELS,
    describe_ensemble,
    first_node,
    main_path,
    next_label,
    next_nodes,
    node_names,
    nodes,
    progress_line,
    summarize,
)
from graphs.qa import build_graph
from infra.bioasq.types import PHASES

# The maps each surface copied before graphs/describe.py read them from the compiled graph
# (graphs/cli/ask.py PROGRESS and NEXT, graphs/web/app.js LABELS and NEXT, graphs/chat/terminal.py
# NEXT): the words people see must not change.
ASK_NEXT = {
    "generate_query": "search",
    "search": "rerank",
    "refine_query": "search",
    "rerank": "organize",
    "organize": "ensemble",
    "ensemble": "synthesize",
    "synthesize": "finalize",
    "fallback_search": "rerank",
}
ASK_LABELS = {
    "generate_query": "writing the search query",
    "search": "searching",
    "refine_query": "relaxing the query",
    "rerank": "reranking",
    "organize": "organizing contexts",
    "ensemble": "ensemble answering",
    "synthesize": "synthesizing",
    "fallback_search": "searching PubMed",
    "finalize": "finalizing",
}
CHAT_NEXT = {
    "generate_query": "searching…",
    "search": "reranking…",
    "refine_query": "searching again…",
    "rerank": "organizing contexts…",
    "organize": "ensemble answering…",
    "ensemble": "synthesizing…",
    "synthesize": "finalizing…",
    "fallback_search": "reranking…",
}


@pytest.mark.parametrize("phase", PHASES)
def test_every_node_of_every_phase_has_a_label(phase):
    compiled = {n for n in build_graph(phase=phase).nodes if not n.startswith("__")}
    assert set(nodes(phase)) == compiled
    assert compiled <= set(LABELS)


def test_labels_name_exactly_the_graphs_nodes():
    assert set(LABELS) == set(node_names())
    assert set(DONE) <= set(LABELS)


def test_the_whole_graphs_next_nodes_are_those_the_surfaces_showed():
    assert next_nodes("A+") == ASK_NEXT
    assert {n: LABELS[n] for n in ASK_LABELS} == ASK_LABELS


def test_ask_and_the_page_say_what_comes_next_as_before():
    for node in nodes("A+"):
        before = ASK_LABELS.get(ASK_NEXT.get(node, ""), "working")
        assert next_label(node) == before, node
    assert LABELS[first_node()] == "writing the search query"


def test_chat_says_what_comes_next_as_before():
    assert {n: status_after(n) for n in CHAT_NEXT} == CHAT_NEXT
    assert status_after("finalize") == "working…"


def test_main_paths_skip_every_detour():
    assert main_path("A+") == (
        "generate_query",
        "search",
        "rerank",
        "organize",
        "ensemble",
        "synthesize",
        "finalize",
    )
    assert main_path("A") == ("generate_query", "search", "rerank", "finalize")
    assert main_path("B") == ("given_evidence", "organize", "ensemble", "synthesize", "finalize")


def test_next_nodes_follow_each_phases_own_edges():
    assert next_nodes("A") == {
        "generate_query": "search",
        "search": "rerank",
        "refine_query": "search",
        "rerank": "finalize",
    }
    assert next_nodes("B")["given_evidence"] == "organize"
    assert "finalize" not in next_nodes("B")


def test_one_line_summaries_keep_their_words():
    assert progress_line("search", {"hits": 8412}) == "searched: 8,412 hits"
    assert progress_line("generate_query", {}) == "query written"
    assert progress_line("finalize", {}) == "finalize"
    assert progress_line("organize", {"organized": [{}] * 4, "groups": [{}] * 2}) == (
        "organized 4 contexts into 2 groups"
    )
    assert summarize("search", {"hits": 8412}) == "8,412 hits"
    assert summarize("synthesize", {"answer": {"confidence": 0.876}}) == "confidence 0.88"
    assert summarize("fallback_search", {"notes": ["PubMed unreachable"]}) == "PubMed unreachable"


def test_a_ccv_vote_left_to_the_majority_is_described_not_a_crash():
    votes = {"strategy": "ccv", "ranked": ["a", "b"], "table": [], "ccv": "list answers are voted"}
    lines = describe_ensemble({"members": [], "votes": votes})
    assert "citation-consistent vote: not used (list answers are voted)" in lines
    assert lines[-1] == "ranked: a; b"
