"""given_evidence (BioASQ phase B): the given snippets become contexts, and a trace shows them."""

from graphs.describe import trace_text
from nodes.given_evidence import contexts_from_snippets

URL = "http://www.ncbi.nlm.nih.gov/pubmed/"
SNIPPETS = [
    {"document": URL + "222", "text": "CFTR is a chloride channel."},
    {"document": URL + "111", "text": "ENaC reabsorbs sodium. " * 6},
    {"document": URL + "222", "text": "CFTR is a chloride channel."},  # given twice: read once
    {"document": URL + "111", "text": "Its loss dehydrates airways."},
    {"document": "not a PubMed address", "text": "dropped"},
]


def test_contexts_follow_the_documents_order_and_join_each_documents_snippets():
    contexts = contexts_from_snippets([URL + "111", URL + "222"], SNIPPETS)
    assert [c["pmid"] for c in contexts] == ["111", "222"]
    assert contexts[0]["abstract"].endswith("Its loss dehydrates airways.")
    assert contexts[1]["abstract"] == "CFTR is a chloride channel."
    assert [c["score"] for c in contexts] == [1.0, 0.5]


def test_the_trace_lists_each_context_in_rank_order_with_the_start_of_its_text():
    contexts = contexts_from_snippets([URL + "111", URL + "222"], SNIPPETS)
    update = {"contexts": contexts, "ranked": [(c["pmid"], c["score"]) for c in contexts]}
    lines, covered = trace_text("given_evidence", update)
    assert lines[0] == "2 contexts from the given snippets, in the order given:"
    first, second = lines[2], lines[3]
    assert first.split()[:3] == ["1", "111", f"{len(contexts[0]['abstract']):,}"]
    assert first.endswith("…") and "ENaC reabsorbs sodium." in first
    assert second.split()[:2] == ["2", "222"] and second.endswith("CFTR is a chloride channel.")
    assert {"contexts", "ranked"} <= covered  # not shown again raw below the table


def test_a_trace_of_no_usable_snippets_says_there_is_nothing_to_answer_from():
    lines, _ = trace_text("given_evidence", {"contexts": [], "ranked": []})
    assert lines == ["no usable snippets were given: nothing to answer from"]
    # The negative control: with a context, the table replaces that line.
    lines, _ = trace_text(
        "given_evidence", {"contexts": contexts_from_snippets([], SNIPPETS[:1]), "ranked": []}
    )
    assert "nothing to answer from" not in " ".join(lines)
