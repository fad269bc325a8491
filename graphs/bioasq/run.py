"""`quorum bioasq run`: a BioASQ Task B batch that survives crashes.

Every finished question is appended to a journal next to the output (one JSON line, fsynced)
before the next result is trusted; a re-run with the same input and phase skips what the journal
holds, so a batch killed at any point (kill -9 included) and started again answers each question
once. The submission is written from the journal at the end, atomically (temp file + rename).
Failures are retried; those that persist are journalled, reported, and make the exit non-zero —
a re-run tries them again.

A question quorum could not answer from the evidence is journalled with its honest answer
("Insufficient evidence: <why>.") as `"status": "insufficient"`; a re-run tries it again unless
told to keep it (`keep_insufficient`). Whether a result is an answer is the one door's word
(nodes/answered.py): finalize's verdict stands, and a result that no support check held to the
answer contract (infra/bioasq/contract.py) is held to it here, so an answer that breaks it
(empty, debris, a contradiction) is never journalled ok, whatever a node let through: it is
tried again, then journalled insufficient. A run in which no
model gave a parseable answer (nodes/records.model_failed) is tried again, then journalled
`"status": "failed"` with the same honest answer, and a re-run tries it again. A submission must
hold a yes/no exact answer: an unanswered yes/no question is written with
`bioasq.unanswered_yesno` and journalled `"guessed": true`, so a reader can count the guesses.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from graphs.bioasq.journal import Journal, answer_support, fingerprint, journal_path
from graphs.inputs import load_testset
from graphs.runtime import GraphRunner
from infra.bioasq.contract import insufficient_answer
from infra.bioasq.formats import Question
from infra.bioasq.types import ANSWERING_PHASES, RETRIEVING_PHASES
from infra.bioasq.urls import pubmed_url
from infra.bioasq.validate import SNIPPET_KEYS
from infra.files import write_json_atomic
from infra.heartbeat import Heartbeat
from nodes.answered import why_unanswered
from nodes.context import Context
from nodes.records import model_failed
from nodes.state import InputState, Result


@dataclass
class BatchReport:
    """What a batch did: answered now, taken from the journal, insufficient, failed, the cost."""

    answered: int = 0
    """Questions answered (status ok) by this run."""
    resumed: int = 0
    """Questions taken from the journal instead of run again."""
    insufficient: dict[str, str] = field(default_factory=dict)
    """Questions whose answer in the submission says the evidence is insufficient, and why."""
    failed: dict[str, str] = field(default_factory=dict)
    guessed: list[str] = field(default_factory=list)
    """Yes/no questions whose submitted exact answer is bioasq.unanswered_yesno, not an answer."""
    not_started: int = 0
    """Questions left unstarted because the run was asked to stop (Ctrl-C)."""
    llm_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    output: Path | None = None


def submission_entry(question: Question, phase: str, result: Result) -> dict[str, Any]:
    """Shape one answered question as a Task B submission entry for the phase."""
    entry: dict[str, Any] = {"id": question.id, "body": question.body, "type": question.type}
    if phase in RETRIEVING_PHASES:
        entry["documents"] = [pubmed_url(p) for p in result.get("documents", [])]  # finalize cut
        entry["snippets"] = [{k: s[k] for k in SNIPPET_KEYS} for s in result.get("snippets", [])][
            :10
        ]
    if phase in ANSWERING_PHASES:
        if question.type != "summary":
            entry["exact_answer"] = result.get("exact_answer")
        entry["ideal_answer"] = result.get("ideal_answer") or ""
    return entry


def write_submission(
    output: Path,
    questions: list[Question],
    done: dict[str, dict],
    stand_ins: dict[str, dict] | None = None,
) -> int:
    """Write the answered questions, in test-set order, atomically; return how many.

    A question answered 'insufficient evidence' (or failed after such an answer) is written
    with that answer, so the file stays complete, until a later run answers it.
    """
    stand_ins = stand_ins or {}
    entries = [
        done[q.id]["entry"] if q.id in done else stand_ins[q.id]
        for q in questions
        if q.id in done or q.id in stand_ins
    ]
    write_json_atomic(output, {"questions": entries}, what="--output")
    return len(entries)


async def run_batch(
    context: Context,
    input_path: Path,
    output: Path,
    *,
    phase: str,
    concurrency: int = 1,
    limit: int | None = None,
    attempts: int = 2,
    keep_insufficient: bool = False,
    progress: bool | None = None,
    on_question: Callable[[str], None] | None = None,
    stop: Callable[[], bool] | None = None,
    questions: list[Question] | None = None,
) -> BatchReport:
    """Answer a test set's questions into `output`, resuming from its journal.

    Questions the journal holds as answered are skipped; those it holds as insufficient are
    tried again unless `keep_insufficient`. Once `stop()` is true no question starts; those in
    flight finish and are journalled. `questions`: the test set already read (and checked) from
    `input_path` by the caller; read here when None.
    """
    if questions is None:
        questions = load_testset(input_path, phase=phase, limit=limit)
    output.parent.mkdir(parents=True, exist_ok=True)
    journal = Journal(journal_path(output), fingerprint(input_path, phase))

    def kept(qid: str) -> bool:
        return qid in journal.done or (keep_insufficient and qid in journal.insufficient)

    report = BatchReport(resumed=sum(kept(q.id) for q in questions), output=output)
    todo = [q for q in questions if not kept(q.id)]
    started = time.perf_counter()
    bar = tqdm(
        total=len(questions),
        initial=report.resumed,
        unit=" q",
        file=sys.stderr,
        dynamic_ncols=True,
        disable=None if progress is None else not progress,
    )
    gate = asyncio.Semaphore(concurrency)
    demo = phase in ANSWERING_PHASES and context.settings.models.uses_demo_model()
    finished: list[str] = []
    settings = context.settings
    try:
        async with GraphRunner(settings, phase=phase) as runner:

            async def one(question: Question) -> None:
                async with gate:
                    if stop is not None and stop():
                        report.not_started += 1
                        return
                    if on_question is not None:
                        on_question(question.id)
                    record = await _answer(
                        runner,
                        context,
                        question,
                        phase,
                        attempts,
                        unanswered_yesno=settings.bioasq.unanswered_yesno,
                    )
                if demo:
                    record["demo_model"] = True  # whoever reads the journal sees who answered
                journal.record(record)
                if record["status"] == "ok":
                    report.answered += 1
                report.llm_calls += record.get("llm_calls", 0)
                report.tokens += record.get("tokens", 0)
                bar.update(1)
                finished.append(question.id)
                if bar.disable:  # not a terminal: one line per question, for logs and pipes
                    done = report.resumed + len(finished)
                    status = record["status"]
                    seconds = f"{record['seconds']:.1f} s, " if "seconds" in record else ""
                    print(
                        f"[{done}/{len(questions)}] {question.id} {status} ({seconds}"
                        f"{record.get('llm_calls', 0)} LLM calls)",
                        file=sys.stderr,
                        flush=True,
                    )
                bar.set_postfix(
                    insufficient=len([q for q in questions if q.id in journal.insufficient]),
                    failed=len([q for q in questions if q.id in journal.failed]),
                    calls=report.llm_calls,
                    tokens=report.tokens,
                    refresh=False,
                )

            def describe() -> str:
                done = report.resumed + len(finished)
                return f"bioasq run: {done} of {len(questions)} questions done"

            with Heartbeat(describe):
                await asyncio.gather(*(one(q) for q in todo))
    finally:
        bar.close()
        journal.close()
    report.failed = {q.id: journal.failed[q.id] for q in questions if q.id in journal.failed}
    report.insufficient = {
        q.id: journal.insufficient[q.id].get("reason") or ""
        for q in questions
        if q.id in journal.insufficient
    }
    report.guessed = [q.id for q in questions if q.id in journal.guessed]
    write_submission(output, questions, journal.done, journal.stand_ins)
    report.seconds = time.perf_counter() - started
    return report


async def _answer(
    runner: GraphRunner,
    context: Context,
    question: Question,
    phase: str,
    attempts: int,
    *,
    unanswered_yesno: str,
) -> dict[str, Any]:
    inputs: InputState = {"question": question.body, "qtype": question.type}
    if phase == "B":
        inputs["given"] = {"documents": question.documents, "snippets": question.snippets}
    error = ""
    calls = tokens = 0
    unanswered: dict[str, Any] | None = None  # the latest insufficient or model-failed outcome
    began = time.perf_counter()
    for attempt in range(1, attempts + 1):
        thread_id = f"bioasq-{uuid.uuid4().hex}"
        try:
            outcome = await runner.run(
                context, inputs, thread_id=thread_id, metadata={"bioasq_id": question.id}
            )
        except Exception as exc:  # one question must not sink the batch
            error = f"attempt {attempt}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            continue
        calls += len(outcome.calls)
        tokens += outcome.tokens
        result = outcome.result
        entry = submission_entry(question, phase, result)
        record = {
            "id": question.id,
            "thread_id": thread_id,
            "attempt": attempt,
            "entry": entry,
            "confidence": result.get("confidence"),
            "llm_calls": calls,
            "tokens": tokens,
            "seconds": round(time.perf_counter() - began, 3),
        }
        if phase in ANSWERING_PHASES and (support := answer_support(outcome.values)) is not None:
            record["support"] = support  # the verdict, its relevance, and who verified it
        if model_failed(result):
            # No model answered anything usable: an error, tried again, and again by a re-run.
            reason = str(result.get("insufficient_reason"))
            unanswered = {"status": "failed", "insufficient": True, **record, "error": reason}
            error = f"attempt {attempt}: {reason}"
            continue
        reason = _why_insufficient(question, phase, result, entry)
        if reason is None:
            return {"status": "ok", "insufficient": False, **record}
        unanswered = {"status": "insufficient", "insufficient": True, **record, "reason": reason}
        if result.get("insufficient"):
            # The graph itself concluded the evidence is insufficient: running it again costs
            # as much, and a later `bioasq run` retries it anyway. Junk is tried again.
            break
        error = f"attempt {attempt}: insufficient evidence ({reason})"
    if unanswered is None:
        return {"status": "failed", "id": question.id, "error": error, "llm_calls": calls}
    guessed = _stand_in(unanswered["entry"], question.type, unanswered_yesno)
    return unanswered | {"guessed": guessed}


def _why_insufficient(
    question: Question, phase: str, result: Result, entry: dict[str, Any]
) -> str | None:
    """Return why a result is no answer (an honest insufficient one, or junk), else None.

    The one door decides (nodes/answered.py): it takes finalize's verdict, and holds to the
    contract only a result that no support check held to it (junk a node let through). Junk
    is rewritten in `entry` into the honest answer, so that it is never submitted as if it
    were one.
    """
    if phase not in ANSWERING_PHASES:
        return None
    said = str(result.get("insufficient_reason") or "") if result.get("insufficient") else None
    reason = why_unanswered(
        question.type,
        question.body,
        entry.get("exact_answer"),
        entry.get("ideal_answer"),
        said=said,
        verdict=(result.get("support") or {}).get("verdict"),
    )
    if reason is None or said is not None:
        return reason
    reason = f"the answer broke the answer contract: {reason}"
    entry["ideal_answer"] = insufficient_answer(reason)
    return reason


def _stand_in(entry: dict[str, Any], qtype: str, unanswered_yesno: str) -> bool:
    """Give an unanswered question's entry the exact answer a submission must hold; True if guessed.

    Nothing was supported, so a factoid or list answer is empty; a yes/no one cannot be, and
    holds the configured `bioasq.unanswered_yesno` (BioASQ's majority class by default).
    """
    if "exact_answer" not in entry:  # a summary, or a phase without answers
        return False
    if qtype == "yesno":
        entry["exact_answer"] = unanswered_yesno
        return True
    entry["exact_answer"] = []
    return False
