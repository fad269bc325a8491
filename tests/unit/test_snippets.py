"""Sentence spans and BioASQ snippets with exact offsets, using a deterministic fake embedder."""

from __future__ import annotations

import pytest

from infra.snippets import (
    ScoredSentence,
    best_snippets,
    choose_snippets,
    score_sentences,
    sentences,
)
from tests.support.fakes import HashEmbedder


@pytest.fixture
def bow() -> HashEmbedder:
    return HashEmbedder()


DOCS = [
    {
        "pmid": "101",
        "title": "Aspirin and colorectal cancer prevention",
        "abstract": "We followed a large cohort for ten years. "
        "Daily aspirin lowered colorectal cancer incidence by a third. "
        "Bleeding was rare among participants.",
    },
    {
        "pmid": "102",
        "title": "Statins in heart disease",
        "abstract": "Statins reduced cholesterol in most participants. "
        "Aspirin users had fewer colorectal cancer cases in a secondary analysis.",
    },
    {
        "pmid": "103",
        "title": "Mitochondria in neurons",
        "abstract": "Mitochondrial transport fails early in neurodegeneration. "
        "Axons lose energy supply over several months.",
    },
]
QUESTION = "Does aspirin prevent colorectal cancer?"


def spans_text(text: str) -> list[str]:
    return [text[begin:end] for begin, end in sentences(text)]


# --- sentences --------------------------------------------------------------------------------


def test_sentences_split_at_sentence_ends():
    text = "Aspirin lowered the risk of cancer. The effect lasted for ten years!"
    assert spans_text(text) == [
        "Aspirin lowered the risk of cancer.",
        "The effect lasted for ten years!",
    ]


def test_sentence_spans_are_offsets_into_the_text():
    text = "Aspirin lowered the risk of cancer. The effect lasted for ten years."
    assert sentences(text) == [(0, 35), (36, 68)]


def test_sentences_are_trimmed_of_surrounding_spaces():
    text = "   Leading spaces are removed from here.    Trailing ones are removed as well.   "
    assert spans_text(text) == [
        "Leading spaces are removed from here.",
        "Trailing ones are removed as well.",
    ]


def test_et_al_does_not_end_a_sentence():
    text = "As shown by Smith et al. Their cohort was large enough. A second one was not."
    assert spans_text(text) == [
        "As shown by Smith et al. Their cohort was large enough.",
        "A second one was not.",
    ]


def test_e_g_does_not_end_a_sentence():
    text = "Several drugs, e.g. Aspirin and Ibuprofen, reduce pain. Other drugs do not help."
    assert spans_text(text) == [
        "Several drugs, e.g. Aspirin and Ibuprofen, reduce pain.",
        "Other drugs do not help.",
    ]


def test_single_letter_initial_does_not_end_a_sentence():
    text = "The strain was described by J. Smith in rats. It caused severe disease in mice."
    assert spans_text(text) == [
        "The strain was described by J. Smith in rats.",
        "It caused severe disease in mice.",
    ]


def test_species_initial_does_not_end_a_sentence():
    text = "The parasite A. madagascariensis was isolated. It caused severe disease in mice."
    assert spans_text(text)[0] == "The parasite A. madagascariensis was isolated."


def test_other_abbreviations_do_not_end_a_sentence():
    text = "See Fig. 3 for the detailed results of the trial. Values are in ref. 12 of the paper."
    assert len(sentences(text)) == 2


def test_decimal_numbers_do_not_end_a_sentence():
    text = "The dose was 3.5 mg per day in total. 12 patients were enrolled in the trial."
    assert spans_text(text) == [
        "The dose was 3.5 mg per day in total.",
        "12 patients were enrolled in the trial.",
    ]


def test_a_sentence_may_start_with_a_quote_or_bracket():
    text = 'Patients improved (p < 0.05). "Quoted text starts this sentence here."'
    assert spans_text(text) == [
        "Patients improved (p < 0.05).",
        '"Quoted text starts this sentence here."',
    ]


def test_fragments_shorter_than_twenty_characters_are_dropped():
    text = "Short. This sentence is long enough to be kept. Ok."
    assert spans_text(text) == ["This sentence is long enough to be kept."]


def test_text_without_sentence_end_is_one_sentence():
    text = "no punctuation at all but long enough"
    assert sentences(text) == [(0, len(text))]


def test_empty_text_has_no_sentences():
    assert sentences("") == []


# --- best_snippets ----------------------------------------------------------------------------


def test_snippet_offsets_point_at_the_exact_text(bow):
    snippets = best_snippets(QUESTION, DOCS, bow, limit=20, per_doc=10)
    docs = {d["pmid"]: d for d in DOCS}
    assert snippets
    for snip in snippets:
        pmid = snip["document"].rsplit("/", 1)[-1]
        section = docs[pmid][snip["beginSection"]]
        assert section[snip["offsetInBeginSection"] : snip["offsetInEndSection"]] == snip["text"]
        assert snip["beginSection"] == snip["endSection"]


def test_snippet_document_is_the_pubmed_url(bow):
    snippets = best_snippets(QUESTION, DOCS[:1], bow)
    assert {s["document"] for s in snippets} == {"http://www.ncbi.nlm.nih.gov/pubmed/101"}


def test_snippets_are_ordered_by_similarity_to_the_question(bow):
    snippets = best_snippets(QUESTION, DOCS, bow, limit=20, per_doc=10)
    scores = [s["score"] for s in snippets]
    assert scores == sorted(scores, reverse=True)
    assert snippets[0]["text"] == "Aspirin and colorectal cancer prevention"
    assert snippets[0]["beginSection"] == "title"
    assert snippets[0]["offsetInBeginSection"] == 0


def test_title_snippet_covers_the_title(bow):
    title = DOCS[0]["title"]
    snippets = best_snippets(QUESTION, DOCS[:1], bow, per_doc=10)
    titles = [s for s in snippets if s["beginSection"] == "title"]
    assert len(titles) == 1
    assert titles[0]["endSection"] == "title"
    assert (titles[0]["offsetInBeginSection"], titles[0]["offsetInEndSection"]) == (0, len(title))


def test_every_sentence_is_a_candidate_when_limits_allow(bow):
    snippets = best_snippets(QUESTION, DOCS[:1], bow, limit=20, per_doc=10, merge=False)
    # The title and three abstract sentences.
    assert len(snippets) == 4
    assert sum(s["beginSection"] == "abstract" for s in snippets) == 3


def test_per_doc_caps_snippets_from_each_document(bow):
    snippets = best_snippets(QUESTION, DOCS, bow, limit=20, per_doc=1)
    documents = [s["document"] for s in snippets]
    assert len(documents) == len(set(documents)) == 3


def test_per_doc_two_is_the_default(bow):
    snippets = best_snippets(QUESTION, DOCS, bow, limit=20)
    documents = [s["document"] for s in snippets]
    assert max(documents.count(d) for d in documents) == 2


def test_limit_caps_the_number_of_snippets(bow):
    snippets = best_snippets(QUESTION, DOCS, bow, limit=2, per_doc=10)
    assert len(snippets) == 2


def test_the_most_relevant_sentence_of_another_document_is_found(bow):
    snippets = best_snippets(QUESTION, DOCS[1:2], bow, limit=1, per_doc=1, merge=False)
    assert snippets[0]["text"] == (
        "Aspirin users had fewer colorectal cancer cases in a secondary analysis."
    )
    assert snippets[0]["beginSection"] == "abstract"


def test_documents_without_sentences_give_no_snippets(bow):
    docs = [{"pmid": "1", "title": "Short", "abstract": ""}, {"pmid": "2", "title": None}]
    assert best_snippets(QUESTION, docs, bow) == []


def test_no_documents_give_no_snippets(bow):
    assert best_snippets(QUESTION, [], bow) == []


# --- score_sentences / choose_snippets ---------------------------------------------------------


def scored_by_hand(*scores: float, per_document: int = 2) -> list[ScoredSentence]:
    """`per_document` sentences a document, documents ranked 0, 1, 2 …, with the given scores.

    Document d's abstract is its sentences "sentence i." joined by one space.
    """
    out = []
    for d in range(0, len(scores), per_document):
        texts = [f"sentence {i}." for i in range(d, min(d + per_document, len(scores)))]
        source = " ".join(texts)
        begin = 0
        for i, text in enumerate(texts, start=d):
            rank = d // per_document
            out.append(
                ScoredSentence(
                    rank,
                    str(100 + rank),
                    "abstract",
                    begin,
                    begin + len(text),
                    text,
                    scores[i],
                    source,
                )
            )
            begin += len(text) + 1
    return out


def test_score_sentences_ranks_documents_in_the_order_given(bow):
    scored = score_sentences(QUESTION, list(reversed(DOCS)), bow)
    assert {s.pmid: s.rank for s in scored} == {"103": 0, "102": 1, "101": 2}
    assert [s.text for s in scored][:1] == ["Mitochondria in neurons"]


def test_choose_snippets_is_best_snippets_over_the_same_scores(bow):
    scored = score_sentences(QUESTION, DOCS, bow)
    for limit, per_doc in ((10, 2), (3, 1), (20, 10)):
        assert choose_snippets(scored, limit=limit, per_doc=per_doc) == best_snippets(
            QUESTION, DOCS, bow, limit=limit, per_doc=per_doc
        )


def test_min_score_leaves_out_weak_sentences_but_keeps_the_best():
    scored = scored_by_hand(0.9, -1.0, 0.5, 0.1, -2.0, -3.0)
    kept = choose_snippets(scored, limit=10, per_doc=2, min_score=0.3, merge=False)
    assert [s["text"] for s in kept] == ["sentence 0.", "sentence 2."]
    floor_above_all = choose_snippets(scored, limit=10, per_doc=2, min_score=5.0)
    assert [s["text"] for s in floor_above_all] == ["sentence 0."]
    assert len(choose_snippets(scored, limit=10, per_doc=2, merge=False)) == 6


def test_documents_limits_snippets_to_the_top_ranked_documents():
    scored = scored_by_hand(0.1, 0.2, 0.9, 0.8, 0.7, 0.6)
    top_one = choose_snippets(scored, limit=10, per_doc=5, documents=1, merge=False)
    assert [s["text"] for s in top_one] == ["sentence 1.", "sentence 0."]
    top_two = choose_snippets(scored, limit=10, per_doc=5, documents=2)
    assert {s["document"].rsplit("/", 1)[-1] for s in top_two} == {"100", "101"}


def test_neighbouring_sentences_merge_into_one_snippet_with_exact_offsets():
    # one document of five sentences: 0 and 1 side by side, 3 alone, 4 beside 3
    scored = scored_by_hand(0.9, 0.8, 0.1, 0.7, 0.6, per_document=5)
    source = scored[0].source
    merged = choose_snippets(scored, limit=2, per_doc=2, min_score=0.5)
    assert [s["text"] for s in merged] == ["sentence 0. sentence 1.", "sentence 3. sentence 4."]
    for snippet in merged:  # offsets cut the snippet's text out of the section
        begin, end = snippet["offsetInBeginSection"], snippet["offsetInEndSection"]
        assert source[begin:end] == snippet["text"]
    assert merged[0]["score"] == 0.9
    # a merge takes no slot: with one slot, 0 and 1 still come as one snippet
    assert [s["text"] for s in choose_snippets(scored, limit=1, per_doc=1, min_score=0.75)] == [
        "sentence 0. sentence 1."
    ]
    # without merging, each sentence is a snippet and the slots run out
    plain = choose_snippets(scored, limit=2, per_doc=2, min_score=0.5, merge=False)
    assert [s["text"] for s in plain] == ["sentence 0.", "sentence 1."]
    # a sentence between two chosen ones joins them into one span
    bridged = choose_snippets(scored_by_hand(0.9, 0.1, 0.8, per_document=3), limit=2, per_doc=2)
    assert [s["text"] for s in bridged] == ["sentence 0. sentence 1. sentence 2."]


def test_eval_snippets_ceiling_scores_the_gold_text_where_the_index_holds_it(make_context):
    from graphs.eval.snippets import at_their_text, ceiling
    from infra.bioasq.formats import Question
    from tests.support.data import DOCS as INDEXED

    abstract = INDEXED[0]["abstract"]
    text = "Cyclosporin A reduced perforation formation."
    at = abstract.index(text)
    url = "http://www.ncbi.nlm.nih.gov/pubmed/101"
    right = {"document": url, "text": text, "beginSection": "abstract", "endSection": "abstract"}
    right |= {"offsetInBeginSection": at, "offsetInEndSection": at + len(text)}
    # the same text where PubMed's longer abstract has it: the index's copy starts earlier
    shifted = {
        **right,
        "offsetInBeginSection": at + 500,
        "offsetInEndSection": at + 500 + len(text),
    }
    questions = [
        Question("a", "q?", "summary", [url], [right]),
        Question("b", "q?", "summary", [url], [shifted]),
    ]
    gold = {
        "questions": [
            {
                "id": q.id,
                "type": q.type,
                "body": q.body,
                "documents": q.documents,
                "snippets": q.snippets,
            }
            for q in questions
        ]
    }
    ctx = make_context()
    found = ceiling(ctx, questions, gold)
    # one gold snippet points at its text in the index; the other's offsets cannot be reached
    assert found == {"ceiling_f1": 0.5, "gold_offsets_in_index": 0.5}
    # scored at their text, both gold snippets are where the index has the sentence
    moved = at_their_text(ctx, questions)["questions"]
    assert moved[0]["snippets"] == [right] and moved[1]["snippets"] == [right]
    assert gold["questions"][1]["snippets"] == [shifted]  # the gold itself is left alone


def test_a_supporting_sentence_holds_the_answer_and_states_rather_than_asks():
    from infra.snippets import supporting_sentences
    from tests.support.fakes import HashEmbedder

    doc = {
        "pmid": "1",
        "title": "Does losartan reduce brain atrophy?",
        "abstract": "Brain volume was measured. Losartan reduced atrophy in the trial.",
    }
    other = {"pmid": "2", "title": "Sodium channels", "abstract": "ENaC absorbs sodium."}
    embedder = HashEmbedder()
    found = supporting_sentences("Does losartan reduce brain atrophy?", "yes", [doc], embedder)
    assert not found["1"].text.endswith("?")  # the title asks; a statement supports
    held = supporting_sentences("Which channel?", "ENaC", [doc, other], embedder, holding=True)
    assert list(held) == ["2"] and held["2"].text == "ENaC absorbs sodium."
