"""A structured reply cut off at the token limit is asked again tighter, then reported."""

import json
import re
from typing import Annotated

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.json import parse_json_markdown
from pydantic import BaseModel, Field

from infra.models import ChatModel
from infra.settings import ModelSpec
from infra.structured import (
    BRIEF,
    REPLY_SLACK,
    SHOWN_OVER_LONG,
    UnparsedReply,
    longest_json,
    over_long,
    parse_json_reply,
    tightened,
    was_cut_off,
)
from tests.support.fakes import script


class Summary(BaseModel):
    ideal_answer: str = Field(max_length=600)
    cited: list[str] = Field(max_length=4)


class CutOffModel(BaseChatModel):
    """Replies cut off at the limit `cut` times, then a whole answer; records what it was asked."""

    cut: int
    asked: list[list] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "cut-off"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.asked.append(list(messages))
        if len(self.asked) <= self.cut:
            message = AIMessage(
                content='{"ideal_answer": "}]]]]]]]]]]]]]]]]]',
                response_metadata={"finish_reason": "length"},
                usage_metadata={"input_tokens": 50, "output_tokens": 384, "total_tokens": 434},
            )
        else:
            message = AIMessage(content=json.dumps({"ideal_answer": "Short.", "cited": ["1"]}))
        return ChatResult(generations=[ChatGeneration(message=message)])


def chat(cut: int) -> ChatModel:
    return ChatModel(
        spec=ModelSpec(provider="openai", model="m", base_url="http://x"), llm=CutOffModel(cut=cut)
    )


async def test_a_cut_off_reply_is_asked_again_once_with_tighter_bounds():
    model = chat(cut=1)
    reply = await model.structured(Summary, [AIMessage(content="q")])
    assert reply.error is None and reply.value == Summary(ideal_answer="Short.", cited=["1"])
    first, second = model.llm.asked
    assert BRIEF not in str(first) and BRIEF in str(second)
    schema_in_words = json.loads(second[0].content.split("\n", 1)[1])
    assert schema_in_words["properties"]["ideal_answer"]["maxLength"] == 300
    assert reply.output_tokens >= 384  # both calls are counted


async def test_cut_off_twice_is_a_failed_call_with_the_reason():
    model = chat(cut=2)
    reply = await model.structured(Summary, [AIMessage(content="q")])
    assert reply.value is None
    assert reply.error.startswith("unparseable output: cut off at the 384-token limit, twice")
    assert reply.raw.startswith('{"ideal_answer": "}]]]')
    assert len(model.llm.asked) == 2


async def test_a_reply_that_fails_for_another_reason_is_not_retried():
    model = ChatModel(
        spec=ModelSpec(provider="openai", model="m", base_url="http://x"), llm=CutOffModel(cut=0)
    )
    model.llm.asked = []

    class Other(BaseModel):
        number: int

    reply = await model.structured(Other, [AIMessage(content="q")])
    assert reply.value is None and "cut off" not in reply.error and len(model.llm.asked) == 1


def test_tightened_halves_string_and_array_bounds_but_not_enums():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 600},
            "b": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            "c": {"type": "string", "enum": ["yes", "no"]},
            "d": {"type": "string"},
        },
    }
    out = tightened(schema)["properties"]
    assert out["a"]["maxLength"] == 300 and out["b"]["maxItems"] == 2
    assert "maxLength" not in out["c"] and out["d"]["maxLength"] == 256
    assert out["b"]["items"]["maxLength"] == 256
    assert schema["properties"]["a"]["maxLength"] == 600  # the original is untouched


def test_was_cut_off_reads_the_finish_reason_or_the_token_count():
    assert was_cut_off(AIMessage(content="", response_metadata={"finish_reason": "length"}), 10)
    assert not was_cut_off(AIMessage(content="", response_metadata={"finish_reason": "stop"}), 10)
    counted = AIMessage(
        content="", usage_metadata={"input_tokens": 1, "output_tokens": 10, "total_tokens": 11}
    )
    assert was_cut_off(counted, 10) and not was_cut_off(counted, 11)


class Duplicates(BaseModel):
    duplicates: list[int] = Field(default_factory=list)


@pytest.mark.parametrize(
    "raw, reason",
    [
        ('{"duplicates": [2, 3], "cut', "not whole JSON"),  # LangChain reads {"duplicates": [2, 3]}
        ('{"answer": "yes"}', "none of the fields asked for (duplicates)"),
        ("There are no duplicates.", "no JSON object"),
    ],
)
def test_a_reply_cut_short_or_answering_another_schema_is_unparsed(raw, reason):
    try:  # the client's lenient reading, handed over as _parsed
        parsed = parse_json_markdown(raw)
    except ValueError:
        parsed = None
    message = AIMessage(content=raw, additional_kwargs={"_parsed": parsed})
    with pytest.raises(UnparsedReply, match=re.escape(reason)) as caught:
        parse_json_reply(Duplicates, raw, message)
    assert caught.value.raw == raw


@pytest.mark.parametrize(
    "raw, found",
    [
        ('```json\n{"duplicates": [2]}\n```\nPassage 2 repeats 1 {see above}.', [2]),
        ('{"duplicates": [2], "why": "same trial"}', [2]),
        ("{}", []),  # nothing to report is an answer
    ],
)
def test_whole_json_with_chatter_around_it_parses(raw, found):
    assert parse_json_reply(Duplicates, raw).duplicates == found


class HugeModel(BaseChatModel):
    """Replies with `text`, once or every time (a 200,000-character reply, as issue 55 met)."""

    text: str

    @property
    def _llm_type(self) -> str:
        return "huge"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.text))])


HUGE = '{"ideal_answer": "' + "CFTR " * 40_000 + '", "cited": ["1"]}'


class Bounded(BaseModel):
    ideal_answer: str = Field(max_length=600)
    cited: list[Annotated[str, Field(max_length=20)]] = Field(max_length=4)


def test_longest_json_bounds_every_field_and_knows_an_unbounded_one():
    allowed = longest_json(Bounded.model_json_schema())
    # Braces, keys with quotes, colon, comma and a space; each character a six-character escape.
    assert allowed == 2 + (14 + 4) + (7 + 4) + (6 * 600 + 2) + (2 + 4 * (6 * 20 + 2 + 2))
    assert longest_json(Summary.model_json_schema()) is None  # `cited`'s strings: no bound
    within = json.dumps(
        {"ideal_answer": "é" * 600, "cited": ["1" * 20] * 4}
    )  # é written as \\u00e9
    assert (
        len(within) <= allowed + REPLY_SLACK
        and over_long(Bounded.model_json_schema(), within) is None
    )


def test_an_over_long_reply_is_named_with_its_excess_even_when_it_parses_as_json():
    allowed = longest_json(Bounded.model_json_schema()) + REPLY_SLACK
    with pytest.raises(UnparsedReply) as caught:
        parse_json_reply(Bounded, HUGE)
    assert str(caught.value) == (
        f"the reply is over-long: {len(HUGE):,} characters where its schema allows at most "
        f"{allowed:,} ({len(HUGE) - allowed:,} over)"
    )
    assert len(caught.value.raw) == SHOWN_OVER_LONG  # the record keeps its start, not megabytes


async def test_an_over_long_reply_is_a_failed_call_named_as_such():
    model = ChatModel(
        spec=ModelSpec(provider="openai", model="m", base_url="http://x"), llm=HugeModel(text=HUGE)
    )
    reply = await model.structured(Bounded, [AIMessage(content="q")])
    assert reply.value is None
    assert reply.error.startswith(f"unparseable output: the reply is over-long: {len(HUGE):,} ")
    assert len(reply.raw) == SHOWN_OVER_LONG


async def test_synthesis_counts_an_over_long_reply_as_a_failed_attempt(make_context, index):
    from langgraph.runtime import Runtime

    from nodes.synthesize import synthesize

    state = {
        "question": "Which gene is mutated in cystic fibrosis?",
        "qtype": "factoid",
        "organized": index.fetch(["101", "102"]),
        "decision": None,
    }
    huge = "x" * 200_000
    update = await synthesize(state, Runtime(context=make_context(script(synthesize=huge))))
    (attempt,) = update["attempts"]
    assert "the reply is over-long: 200,000 characters" in attempt["error"]
    assert update["answer"]["failed"]
