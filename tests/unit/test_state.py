"""The state: the `pool` reducer (merged by PMID, newer wins, RESET empties) and its typed records."""

from __future__ import annotations

from typing import get_type_hints

import pytest

from nodes.state import (
    RESET,
    Answer,
    Attempt,
    Call,
    Group,
    InputState,
    Member,
    QAState,
    Result,
    SupportSummary,
    Votes,
    merge_by_pmid,
)

A1 = {"pmid": "1", "title": "old title"}
A1_NEW = {"pmid": "1", "title": "new title"}
B2 = {"pmid": "2", "title": "other"}


def test_merge_adds_new_pmids():
    assert merge_by_pmid({"1": A1}, {"2": B2}) == {"1": A1, "2": B2}


def test_merge_lets_the_newer_document_win():
    assert merge_by_pmid({"1": A1, "2": B2}, {"1": A1_NEW}) == {"1": A1_NEW, "2": B2}


def test_merge_does_not_mutate_its_inputs():
    left, right = {"1": A1}, {"1": A1_NEW}
    merge_by_pmid(left, right)
    assert left == {"1": A1}
    assert right == {"1": A1_NEW}


def test_reset_sentinel_empties_the_pool():
    assert merge_by_pmid({"1": A1, "2": B2}, RESET) == {}


def test_any_dict_flagged_reset_empties_the_pool():
    assert merge_by_pmid({"1": A1}, {"__reset__": True}) == {}
    assert merge_by_pmid({"1": A1}, {"__reset__": True, "2": B2}) == {}


def test_reset_of_an_empty_pool_is_empty():
    assert merge_by_pmid(None, RESET) == {}


@pytest.mark.parametrize(
    ("left", "right", "merged"),
    [
        (None, None, {}),
        (None, {"2": B2}, {"2": B2}),
        ({"1": A1}, None, {"1": A1}),
        ({"1": A1}, {}, {"1": A1}),
        ({}, {}, {}),
    ],
)
def test_none_and_empty_sides_are_treated_as_empty(left, right, merged):
    assert merge_by_pmid(left, right) == merged


def test_pool_field_uses_the_reducer():
    metadata = get_type_hints(QAState, include_extras=True)["pool"].__metadata__
    assert metadata == (merge_by_pmid,)


def test_records_inside_the_state_are_typed():
    hints = get_type_hints(QAState)
    assert hints["members"] == list[Member] and hints["votes"] is Votes
    assert hints["answer"] is Answer and hints["attempts"] == list[Attempt]
    assert hints["calls"] == list[Call] and hints["groups"] == list[Group]
    assert hints["result"] is Result
    untyped = {name for name, hint in hints.items() if "dict[str, typing.Any]" in str(hint)}
    assert untyped == set()


def test_the_result_is_typed_to_its_edges():
    """The support verdict a result carries is a record, and the thread a runner adds is
    part of the one Result type that the CLI, the page and `bioasq run` read."""
    hints = get_type_hints(Result)
    assert hints["support"] == SupportSummary | None
    assert "thread_id" in Result.__optional_keys__
    assert not [name for name, hint in hints.items() if "dict[str, typing.Any]" in str(hint)]


def test_optional_fields_are_optional():
    # A NotRequired the TypedDict cannot see (string annotations on Python 3.11) would make
    # every input field required.
    assert InputState.__required_keys__ == {"question"}
    assert Member.__optional_keys__ == {"passage", "quote", "group"}
    assert Answer.__required_keys__ == {"exact", "ideal", "confidence", "cited"}
