"""The boolean query language: parsing, rejection reasons, canonical text and PubMed syntax."""

from __future__ import annotations

import pytest

from infra.search.keywords import keyword_query, keywords, relaxations
from infra.search.query import (
    MAX_CLAUSES,
    MAX_DEPTH,
    MAX_LENGTH,
    TEXT_FIELDS,
    Bool,
    Phrase,
    QueryError,
    Term,
    parse_query,
    to_pubmed,
    to_text,
)


def term(text: str, fields: tuple[str, ...] = TEXT_FIELDS, **kw) -> Term:
    return Term(text, fields, **kw)


# --- valid queries ----------------------------------------------------------------------------


def test_single_word_is_a_term_over_title_and_abstract():
    assert parse_query("aspirin") == Term("aspirin", ("title", "abstract"))


def test_term_keeps_its_case_and_inner_hyphen():
    assert parse_query("IL-6") == term("IL-6")


def test_quoted_words_are_a_phrase():
    assert parse_query('"colorectal cancer"') == Phrase("colorectal cancer", TEXT_FIELDS)


def test_phrase_whitespace_is_collapsed():
    assert parse_query('"  colorectal \t  cancer "').text == "colorectal cancer"


def test_phrase_slop_and_boost():
    assert parse_query('"colorectal cancer"~2^3') == Phrase(
        "colorectal cancer", TEXT_FIELDS, slop=2, boost=3.0
    )


def test_phrase_slop_without_number_is_one():
    assert parse_query('"a b"~').slop == 1


def test_phrase_slop_is_capped_at_ten():
    assert parse_query('"a b"~20').slop == 10


def test_term_boost():
    assert parse_query("aspirin^1.5") == term("aspirin", boost=1.5)


def test_and_requires_every_clause():
    assert parse_query("aspirin AND cancer") == Bool(must=(term("aspirin"), term("cancer")))


def test_or_needs_any_clause():
    assert parse_query("aspirin OR cancer") == Bool(should=(term("aspirin"), term("cancer")))


def test_adjacent_clauses_mean_or():
    assert parse_query("aspirin cancer") == parse_query("aspirin OR cancer")


def test_double_ampersand_and_double_pipe_are_and_and_or():
    assert parse_query("a && b") == parse_query("a AND b")
    assert parse_query("a || b") == parse_query("a OR b")


def test_not_after_a_term_excludes():
    assert parse_query("aspirin NOT cancer") == Bool(
        should=(term("aspirin"),), must_not=(term("cancer"),)
    )


def test_and_not_requires_and_excludes():
    assert parse_query("aspirin AND NOT cancer") == Bool(
        must=(term("aspirin"),), must_not=(term("cancer"),)
    )


def test_plus_and_minus_prefixes_mean_required_and_excluded():
    assert parse_query("+aspirin -cancer") == parse_query("aspirin AND NOT cancer")


def test_plus_beside_optional_clause_keeps_both():
    assert parse_query("+aspirin cancer") == Bool(must=(term("aspirin"),), should=(term("cancer"),))


def test_parentheses_group_clauses():
    assert parse_query("(a OR b) AND c") == Bool(
        must=(Bool(should=(term("a"), term("b"))), term("c"))
    )


def test_and_binds_tighter_than_or_on_the_right():
    assert parse_query("a OR b AND c") == Bool(
        should=(term("a"), Bool(must=(term("b"), term("c"))))
    )


def test_and_binds_tighter_than_or_on_the_left():
    assert parse_query("a AND b OR c") == Bool(
        should=(Bool(must=(term("a"), term("b"))), term("c"))
    )


def test_redundant_parentheses_disappear():
    assert parse_query("((aspirin))") == term("aspirin")


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ("title:aspirin", ("title",)),
        ("abstract:aspirin", ("abstract",)),
        ("mesh:aspirin", ("mesh",)),
        ("TITLE:aspirin", ("title",)),
        ("aspirin[tiab]", ("title", "abstract")),
        ("aspirin[ti]", ("title",)),
        ("aspirin[ab]", ("abstract",)),
        ("aspirin[mh]", ("mesh",)),
        ("aspirin[MeSH Terms]", ("mesh",)),
    ],
)
def test_field_prefixes_and_pubmed_tags_restrict_fields(query, fields):
    assert parse_query(query) == term("aspirin", fields)


def test_field_prefix_on_a_phrase():
    assert parse_query('abstract:"a phrase"') == Phrase("a phrase", ("abstract",))


def test_pubmed_tag_on_a_phrase():
    assert parse_query('"Breast Neoplasms"[mh]') == Phrase("Breast Neoplasms", ("mesh",))


def test_field_prefix_applies_to_a_whole_group():
    assert parse_query("title:(a OR b)") == Bool(
        should=(term("a", ("title",)), term("b", ("title",)))
    )


def test_trailing_wildcard_is_a_lowercased_prefix():
    assert parse_query("Mitochond*") == term("mitochond", prefix=True)


def test_prefix_with_field_and_boost():
    assert parse_query("title:mitochond*^2") == term(
        "mitochond", ("title",), prefix=True, boost=2.0
    )


def test_prefix_of_exactly_three_characters_is_allowed():
    assert parse_query("mit*") == term("mit", prefix=True)


def test_nesting_up_to_max_depth_is_allowed():
    query = "(" * MAX_DEPTH + "aspirin" + ")" * MAX_DEPTH
    assert parse_query(query) == term("aspirin")


def test_exactly_max_clauses_is_allowed():
    node = parse_query(" ".join(["t"] * MAX_CLAUSES))
    assert len(node.should) == MAX_CLAUSES


def test_query_of_exactly_max_length_is_allowed():
    query = "a" * MAX_LENGTH
    assert parse_query(query) == term(query)


@pytest.mark.parametrize(
    ("query", "same_as"),
    [
        (
            "Is aspirin effective for cancer prevention?",
            "Is aspirin effective for cancer prevention",
        ),
        ("(aspirin OR NSAID*) AND prevention?", "(aspirin OR NSAID*) AND prevention"),
        ("cancer ? AND tumor!", "cancer AND tumor"),
        ("¿aspirin? ¡cancer! risk.", "aspirin cancer risk"),
        ("title:aspirin, abstract:risk;", "title:aspirin abstract:risk"),
        ("mitochond*?", "mitochond*"),
    ],
)
def test_sentence_punctuation_is_text_not_an_operator(query, same_as):
    # A model that copies the question ends it with '?': the query must run as a person reads it.
    assert parse_query(query) == parse_query(same_as)


def test_or_not_keeps_a_positive_clause():
    assert parse_query("aspirin OR NOT cancer") == Bool(
        should=(term("aspirin"),), must_not=(term("cancer"),)
    )


# --- rejections -------------------------------------------------------------------------------


def rejects(query: str) -> str:
    with pytest.raises(QueryError) as info:
        parse_query(query)
    return str(info.value)


def test_query_error_is_a_value_error():
    assert issubclass(QueryError, ValueError)


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_empty_or_blank_query_is_rejected(query):
    assert rejects(query) == "the query is empty"


def test_query_longer_than_max_length_is_rejected():
    assert rejects("a" * (MAX_LENGTH + 1)) == f"the query is longer than {MAX_LENGTH} characters"


def test_nul_byte_is_rejected():
    assert rejects("aspirin\x00cancer") == "the query contains a NUL character"


def test_unclosed_parenthesis_is_rejected_with_its_position():
    assert rejects("x AND (a OR b") == "unbalanced parenthesis opened at position 6"


def test_stray_closing_parenthesis_is_rejected_with_its_position():
    assert rejects(")aspirin") == "unbalanced ')' at position 0"
    assert rejects("aspirin AND )") == "unbalanced ')' at position 12"


def test_trailing_closing_parenthesis_is_rejected():
    assert rejects("a OR b)") == "unexpected ')' at position 6"


def test_empty_parentheses_are_rejected():
    assert "unbalanced ')'" in rejects("()")


@pytest.mark.parametrize("query", ["journal:nature", "year:2010", "pmid:123", "foo:bar"])
def test_unknown_field_is_rejected(query):
    name = query.split(":")[0]
    assert rejects(query) == (
        f"field {name!r} is not searchable (allowed: title, abstract, mesh, or [tiab]/[ti]/[ab]/[mh])"
    )


@pytest.mark.parametrize("query", ["aspirin[au]", "aspirin[]"])
def test_unknown_pubmed_tag_is_rejected(query):
    assert "is not searchable" in rejects(query)


def test_unknown_tag_error_names_the_tag():
    assert rejects("aspirin[au]").startswith("field 'au' is not searchable")


@pytest.mark.parametrize("query", ["*itis", "?itis", "*"])
def test_leading_wildcard_is_rejected(query):
    assert rejects(query) == f"leading wildcards are not allowed ({query})"


@pytest.mark.parametrize("query", ["mito*chond", "m?t", "mi?o*"])
def test_wildcard_inside_a_term_is_rejected(query):
    assert rejects(query) == f"wildcards are only allowed at the end of a term ({query})"


@pytest.mark.parametrize("query", ["a*", "ab*"])
def test_prefix_shorter_than_three_characters_is_rejected(query):
    assert rejects(query) == f"a prefix needs at least 3 characters ({query})"


def test_regular_expression_is_rejected():
    assert rejects("/mito.*/") == "regular expressions are not allowed (/mito.*/)"


@pytest.mark.parametrize(("query", "edits"), [("aspirin~", 1), ("aspirin~1", 1), ("aspirin~2", 2)])
def test_fuzzy_term_parses_with_its_edit_distance(query, edits):
    node = parse_query(query)
    assert node == Term("aspirin", fuzzy=edits)
    assert to_text(node) == f"aspirin~{edits}"


@pytest.mark.parametrize("query", ["aspirin~3", "aspirin~0", "aspir*~1"])
def test_fuzzy_beyond_two_edits_or_on_a_prefix_is_rejected(query):
    assert rejects(query) == f"fuzzy terms allow 1 or 2 edits on a whole word ({query})"


NO_POSITIVE = "every group needs a positive term: join NOT to one with AND"


@pytest.mark.parametrize("query", ["NOT aspirin", "-aspirin", "NOT a AND NOT b", "-a -b"])
def test_pure_not_query_is_rejected(query):
    assert rejects(query) == NO_POSITIVE


@pytest.mark.parametrize("query", ["aspirin OR (NOT cancer)", "(NOT cancer) OR aspirin"])
def test_not_only_group_inside_or_is_rejected(query):
    assert rejects(query) == NO_POSITIVE


def test_nesting_deeper_than_max_depth_is_rejected():
    depth = MAX_DEPTH + 1
    query = "(" * depth + "aspirin" + ")" * depth
    assert rejects(query) == f"the query nests deeper than {MAX_DEPTH} levels"


def test_more_than_max_clauses_is_rejected():
    query = " ".join(["t"] * (MAX_CLAUSES + 1))
    assert rejects(query) == f"the query has more than {MAX_CLAUSES} clauses"


@pytest.mark.parametrize("query", ["aspirin AND", "aspirin OR", "title:", "("])
def test_query_ending_where_a_term_is_expected_is_rejected(query):
    assert rejects(query) == "the query ends where a term was expected"


def test_leading_and_is_rejected():
    assert rejects("AND aspirin") == "unexpected 'AND' at position 0"


@pytest.mark.parametrize("query", ['""', '" "'])
def test_empty_phrase_is_rejected(query):
    assert rejects(query) == "empty phrase at position 0"


def test_unterminated_quote_is_rejected():
    assert "unexpected character '\"'" in rejects('aspirin "colorectal')


# --- canonical text ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "canonical"),
    [
        ("aspirin", "aspirin"),
        ("aspirin cancer", "aspirin OR cancer"),
        ("a || b", "a OR b"),
        ("a && b", "a AND b"),
        ("a AND NOT b", "+a -b"),
        ("a NOT b", "a -b"),
        ("a OR b AND c", "a OR (b AND c)"),
        ("a AND b OR c", "(a AND b) OR c"),
        ("a AND NOT b OR c", "(+a -b) OR c"),
        ('"colorectal cancer"~2^3', '"colorectal cancer"~2^3'),
        ("aspirin[ti]", "title:aspirin"),
        ("aspirin[tiab]", "aspirin"),
        ("aspirin[mh]", "mesh:aspirin"),
        ("title:(a OR b)", "title:a OR title:b"),
        ("Mitochond*^2", "mitochond*^2"),
        ("a AND (b OR c) AND NOT (d OR e)", "+a +(b OR c) -(d OR e)"),
    ],
)
def test_to_text_gives_the_canonical_form(query, canonical):
    assert to_text(parse_query(query)) == canonical


@pytest.mark.parametrize(
    "query",
    [
        "aspirin",
        '"colorectal cancer"~2',
        "a OR b AND c",
        "(a OR b) AND (c OR d) NOT e",
        "+(a OR b) -(c AND d)",
        'title:"a b"^3 OR mesh:mitochond*',
        "aspirin[ab] AND NOT cancer[mh]",
    ],
)
def test_to_text_round_trips_to_the_same_tree(query):
    node = parse_query(query)
    assert parse_query(to_text(node)) == node


def test_to_text_round_trips_a_phrase_with_an_escaped_quote():
    node = parse_query(r'"a \"b\" c"')
    assert node == Phrase('a "b" c', TEXT_FIELDS)
    assert parse_query(to_text(node)) == node


# --- PubMed syntax ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "pubmed"),
    [
        ("aspirin", "aspirin[tiab]"),
        ("title:aspirin", "aspirin[ti]"),
        ("abstract:aspirin", "aspirin[ab]"),
        ("mesh:Neoplasms", "Neoplasms[mh]"),
        ('"colorectal cancer"~2', '"colorectal cancer"[tiab]'),
        ("mitochond*", "mitochond*[tiab]"),
        ("a AND b", "a[tiab] AND b[tiab]"),
        ("a OR b", "a[tiab] OR b[tiab]"),
        ("(a OR b) AND c", "(a[tiab] OR b[tiab]) AND c[tiab]"),
        ("a AND NOT b", "(a[tiab]) NOT b[tiab]"),
        ("a NOT b NOT c", "((a[tiab]) NOT b[tiab]) NOT c[tiab]"),
        ("+a b", "a[tiab]"),
    ],
)
def test_to_pubmed_renders_pubmed_syntax(query, pubmed):
    assert to_pubmed(parse_query(query)) == pubmed


# --- keywords and fallback queries ------------------------------------------------------------


def test_keywords_drop_stopwords_and_keep_order():
    question = "Is aspirin effective for preventing colorectal cancer?"
    assert keywords(question) == ["aspirin", "effective", "preventing", "colorectal", "cancer"]


def test_keywords_are_lowercased_and_deduplicated():
    assert keywords("CFTR mutations and cftr MUTATIONS") == ["cftr", "mutations"]


def test_keywords_keep_hyphenated_words_and_drop_single_letters():
    assert keywords("What is the role of IL-6 in sepsis, a b c?") == ["il-6", "sepsis"]


def test_keywords_respect_the_limit():
    assert keywords("alpha beta gamma delta", limit=2) == ["alpha", "beta"]


def test_keyword_query_ors_the_keywords_and_quotes_hyphenated_ones():
    query = keyword_query("What are the effects of x-ray exposure on BRCA1 carriers?")
    assert query == 'effects OR "x-ray" OR exposure OR brca1 OR carriers'
    parse_query(query)


def test_keyword_query_of_stopwords_only_keeps_them():
    assert keyword_query("Is it what it is?") == "is OR it OR what"


def test_keywords_are_unicode_aware():
    assert keywords("Что такое ДНК?") == ["что", "такое", "днк"]


def test_keyword_query_without_any_word_is_rejected():
    with pytest.raises(QueryError, match="the question has no searchable words"):
        keyword_query("?? !!")


def test_relaxations_are_keywords_then_sorted_prefixes_then_fuzzy():
    assert relaxations("What is the role of IL-6 in sepsis and genes?") == [
        '"il-6" OR sepsis OR genes',
        '"il-6" OR genes OR sepsi*',
        'sepsis~1 OR genes~1 OR "il-6" OR genes OR sepsi*',
    ]


def test_relaxations_start_by_loosening_the_query():
    first = relaxations("Is X linked to sepsis?", '(il6 AND sepsis) AND NOT "septic shock"')[0]
    assert first == "il6 OR sepsis"
    assert relaxations("Is X linked to sepsis?", "((broken")[0] == "linked OR sepsis"


def test_relaxations_are_valid_queries():
    for query in relaxations("Is aspirin effective for preventing colorectal cancer?"):
        assert isinstance(parse_query(query), Bool)


def test_relaxations_of_a_question_without_words_are_empty():
    assert relaxations("?!") == []


@pytest.mark.parametrize(
    "query",
    [
        "aspirin^100.5",
        "aspirin^101",
        '"cell death"^1000',
        "title:aspirin^250",
        "aspirin^" + "9" * 45,  # a float, but far past any useful weight
        "aspirin^" + "9" * 400,  # infinity
        "(aspirin OR statin^200) AND cancer",
    ],
)
def test_boosts_over_100_are_rejected(query):
    with pytest.raises(QueryError, match=r"boosts must be between 0 and 100 \(.+\^"):
        parse_query(query)


@pytest.mark.parametrize(("query", "boost"), [("aspirin^100", 100.0), ('"cell death"^0.5', 0.5)])
def test_boosts_up_to_100_are_kept(query, boost):
    assert parse_query(query).boost == boost


@pytest.mark.parametrize("query", ["aspirin~" + "9" * 400, '"a b"~' + "9" * 400])
def test_huge_numbers_after_tilde_are_rejected_not_overflowing(query):
    with pytest.raises(QueryError, match="the number after ~ is too large"):
        parse_query(query)
