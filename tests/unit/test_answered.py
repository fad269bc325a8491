"""One door decides whether an answer is given (nodes/answered.py): the rule step, the support
check's gate, finalize and `bioasq run` ask it, so a break of it changes every one of them, and
nothing else in the product holds quorum's own answers to the contract."""

import ast
from pathlib import Path

import pytest
from langgraph.runtime import Runtime

import nodes.answered
from graphs.bioasq.run import _answer
from graphs.runtime import Outcome
from infra.bioasq.formats import Question
from nodes.answered import why_unanswered
from nodes.finalize import finalize
from nodes.synthesize.rule import rule_answer
from nodes.synthesize.support import Judging, check_answer

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Do mitochondria play a role in lace plant programmed cell death?"
BREAK = "a break planted in the door"
IDEAL = "Yes. Mitochondrial dynamics change early during programmed cell death in the lace plant."
DECIDED = {
    "strategy": "single",
    "answers": [{"answer": "yes", "support": 3.0, "cited": ["101"]}],
    "order": ["101", "102"],
    "why": "3 of 3 members answered 'yes'",
    "settings": {},
    "source": "ensemble",
    "share": 1.0,
}


class Runner:
    """A GraphRunner's run whose final state holds this result (no support check ran)."""

    def __init__(self, result: dict):
        self.result = result

    async def run(self, context, inputs, *, thread_id=None, metadata=None, progress=None):
        return Outcome(thread_id or "t", {"result": dict(self.result), "calls": []})


async def outcomes(make_context, index) -> dict[str, str | None]:
    """Return what each caller of the door makes of one good yes/no answer: why not, or None."""
    ctx = make_context()
    contexts = index.fetch(["101", "102"])
    ruled = rule_answer("yesno", QUESTION, DECIDED, contexts, ctx.embedder)
    answer = {"exact": ["yes"], "ideal": IDEAL, "confidence": 0.8, "cited": ["101"]}
    state = {
        "question": QUESTION,
        "qtype": "yesno",
        "contexts": contexts,
        "ranked": [("101", 0.9), ("102", 0.8)],
        "answer": answer,
    }
    result = (await finalize(state, Runtime(context=ctx)))["result"]
    _, refused = check_answer(Judging(QUESTION, {}), "yesno", answer | {"source": "synthesis"}, [])
    given = {"type": "yesno", "exact_answer": "yes", "ideal_answer": IDEAL, "insufficient": False}
    question = Question(id="y1", body=QUESTION, type="yesno")
    record = await _answer(Runner(given), None, question, "B", 1, unanswered_yesno="yes")
    return {
        "rule step": ruled.get("insufficient"),
        "support check": refused,
        "finalize": result["insufficient_reason"],
        "bioasq run": record.get("reason"),
    }


async def test_a_break_of_the_door_changes_every_caller(make_context, index, monkeypatch):
    monkeypatch.setattr(nodes.answered, "answer_problem", lambda *_, **__: BREAK)
    found = await outcomes(make_context, index)
    assert {k: BREAK in (why or "") for k, why in found.items()} == dict.fromkeys(found, True)


async def test_the_control_the_same_answer_is_given_through_an_intact_door(make_context, index):
    found = await outcomes(make_context, index)
    assert found["rule step"] is None and found["finalize"] is None
    assert found["bioasq run"] is None
    # Refused for want of judged passages here, never by the contract.
    assert found["support check"] is not None and "contract" not in found["support check"]


@pytest.mark.parametrize(
    ("said", "verdict", "expected"),
    [
        ("no passage carries it", "supported", "no passage carries it"),  # a gate's word stands
        (None, "supported", None),  # held to the contract by the support check: not again
        (None, "refused", "the support check refused the answer"),
        (None, None, "is not a sentence"),  # held by no gate: the contract, here
    ],
)
def test_what_the_door_reads_before_the_contract(said, verdict, expected):
    why = why_unanswered("factoid", "Which?", [], "} {{", said=said, verdict=verdict)
    assert why == expected if expected is None else expected in why


def test_no_member_answering_is_no_answer_whatever_was_written():
    failed = {"model": "m", "answer": [], "pmids": [], "error": "Connection error."}
    why = why_unanswered("yesno", QUESTION, "yes", IDEAL, verdict="supported", members=[failed])
    assert why.startswith("no ensemble member gave a usable answer")
    assert (
        why_unanswered(
            "yesno", QUESTION, "yes", IDEAL, members=[failed | {"error": None, "answer": ["yes"]}]
        )
        is None
    )


def reaches_the_contract(source: str) -> bool:
    """Tell whether code imports `answer_problem` (under any name) or reads it off a module."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and any(a.name == "answer_problem" for a in node.names):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "answer_problem":
            return True
    return False


def test_the_scan_finds_the_contract_however_it_is_reached():
    """The negative control of the test below: each way in is seen, a mention is not."""
    assert reaches_the_contract("from infra.bioasq.contract import answer_problem as ok")
    assert reaches_the_contract("import infra.bioasq.contract as c\nc.answer_problem(1, 2, 3)")
    assert not reaches_the_contract('"""answer_problem, in words only."""')


def test_only_the_door_and_the_journal_s_reader_reach_the_contract():
    """quorum's answers meet the contract through the door; a journalled entry an older quorum
    wrote is read back at BioASQ's one word (the validator holds files to its pieces)."""
    users = [
        path.relative_to(ROOT).as_posix()
        for top in ("graphs", "nodes", "infra")
        for path in sorted((ROOT / top).rglob("*.py"))
        if reaches_the_contract(path.read_text(encoding="utf-8"))
    ]
    assert users == ["graphs/bioasq/journal.py", "nodes/answered.py"]
