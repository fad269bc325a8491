"""`quorum bioasq run`: phases A, A+ and B, the journal, resume after failures and after kill -9."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphs.bioasq.journal import Journal, JournalMismatch, journal_path
from graphs.bioasq.report import load_run
from graphs.bioasq.run import _answer, run_batch
from graphs.runtime import Outcome
from infra.bioasq.formats import Question
from infra.bioasq.validate import validate_submission
from infra.settings import BioasqSettings
from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import simulated_env
from tests.support.fakes import pmids_in, script

QUESTIONS = [
    ("q1", "Do mitochondria play a role in lace plant programmed cell death?", "yesno"),
    ("q2", "Which organelles act in lace plant cell death?", "list"),
    ("q3", "What forms the perforations of lace plant leaves?", "factoid"),
    ("q4", "Describe programmed cell death in lace plant leaves.", "summary"),
]


def said(call):
    """Return every message of a scripted call as one text."""
    return " ".join(m.content for m in call["messages"])


def write_testset(path: Path, *, snippets: bool = False, count: int = 4) -> Path:
    questions = []
    for i in range(count):
        qid, body, qtype = QUESTIONS[i % len(QUESTIONS)]
        item = {"id": f"{qid}-{i}", "body": body, "type": qtype}
        if snippets:
            item["documents"] = ["http://www.ncbi.nlm.nih.gov/pubmed/101"]
            item["snippets"] = [
                {
                    "document": "http://www.ncbi.nlm.nih.gov/pubmed/101",
                    "text": "Mitochondrial dynamics change early during programmed cell death.",
                    "offsetInBeginSection": 0,
                    "offsetInEndSection": 66,
                    "beginSection": "abstract",
                    "endSection": "abstract",
                }
            ]
        questions.append(item)
    path.write_text(json.dumps({"questions": questions}))
    return path


def answering_model():
    def member(m, kw):
        text = m[-1].content
        if "Answer yes or no" in " ".join(x.content for x in m):
            return {"answer": "yes", "pmids": pmids_in(m)[:1]}
        if "Answer in one or two sentences" in " ".join(x.content for x in m):
            return {"answer": "Areole cells die.", "pmids": pmids_in(m)[:1]}
        if "Give the one best short answer" in " ".join(x.content for x in m):  # factoid
            return {"answer": "mitochondria", "pmids": pmids_in(m)[:1]}
        return {"answer": ["mitochondria"], "pmids": pmids_in(m)[:1] if text else []}

    def synth(m, kw):
        system = " ".join(x.content for x in m)
        out = {
            "ideal_answer": "Mitochondria act early.",
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        }
        if "Answer yes or no" in system:
            out["exact_answer"] = "yes"
        elif "Answer in one or two sentences" not in system:
            out["exact_answer"] = ["mitochondria", "the vacuole"]
        return out

    return script(
        query={"query": "mitochondria OR lace OR cell OR perforation"},
        organize={"duplicates": []},
        ensemble=member,
        synthesize=synth,
    )


async def test_phase_a_writes_documents_and_snippets_only(make_context, tmp_path, capsys):
    model = answering_model()
    out = tmp_path / "out" / "submission.json"
    report = await run_batch(
        make_context(model), write_testset(tmp_path / "t.json"), out, phase="A", progress=False
    )
    assert report.answered == 4 and not report.failed
    # No terminal: one progress line per question, so logs and pipes see the batch move.
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert [line.split()[0] for line in lines] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert all(" ok (" in line and "LLM calls)" in line for line in lines)
    entries = json.loads(out.read_text())["questions"]
    assert [e["id"] for e in entries] == ["q1-0", "q2-1", "q3-2", "q4-3"]
    for e in entries:
        assert "exact_answer" not in e and "ideal_answer" not in e
        assert 0 < len(e["documents"]) <= 10 and len(e["snippets"]) <= 10
        assert all(d.startswith("http://www.ncbi.nlm.nih.gov/pubmed/") for d in e["documents"])
        assert all(
            set(s)
            == {
                "document",
                "text",
                "offsetInBeginSection",
                "offsetInEndSection",
                "beginSection",
                "endSection",
            }
            for s in e["snippets"]
        )
    # Phase A asks no answering model: only the query writer ran.
    assert not any("You are the final judge" in said(c) for c in model.calls)


async def test_phase_a_plus_answers_by_type(make_context, tmp_path):
    out = tmp_path / "sub.json"
    await run_batch(
        make_context(answering_model()),
        write_testset(tmp_path / "t.json"),
        out,
        phase="A+",
        progress=False,
    )
    by_id = {e["id"]: e for e in json.loads(out.read_text())["questions"]}
    # The settings' models are the built-in demo's: every record says the demo answered.
    records = [json.loads(line) for line in journal_path(out).read_text().splitlines()[1:]]
    assert records and all(r["demo_model"] is True for r in records)
    assert by_id["q1-0"]["exact_answer"] == "yes"
    # "the vacuole" is not in the abstract the answer cites: the support check drops it.
    assert by_id["q2-1"]["exact_answer"] == [["mitochondria"]]
    assert by_id["q3-2"]["exact_answer"][0] == ["mitochondria"]
    assert "exact_answer" not in by_id["q4-3"] and by_id["q4-3"]["ideal_answer"]
    assert all(e["documents"] for e in by_id.values())


async def test_phase_b_answers_from_the_given_snippets_without_searching(make_context, tmp_path):
    model = answering_model()
    out = tmp_path / "b.json"
    await run_batch(
        make_context(model),
        write_testset(tmp_path / "t.json", snippets=True),
        out,
        phase="B",
        progress=False,
    )
    entries = json.loads(out.read_text())["questions"]
    assert entries[0]["exact_answer"] == "yes" and "documents" not in entries[0]
    assert not any("You write PubMed search queries" in said(c) for c in model.calls)
    shown = [c for c in model.calls if "You are the final judge" in said(c)]
    assert shown and all(
        "Mitochondrial dynamics change early" in c["messages"][-1].content for c in shown
    )


async def test_phase_b_needs_snippets(make_context, tmp_path):
    from infra.bioasq.formats import FormatError

    with pytest.raises(FormatError, match="phase B needs the given snippets"):
        await run_batch(
            make_context(answering_model()),
            write_testset(tmp_path / "t.json"),
            tmp_path / "o.json",
            phase="B",
            progress=False,
        )


class FailingSearch:
    """The real index, except that searching fails while `broken` holds."""

    def __init__(self, index):
        self._index = index
        self.broken = True

    def __getattr__(self, name):
        return getattr(self._index, name)

    def search(self, query, limit):
        if self.broken:
            raise ConnectionError("search backend down")
        return self._index.search(query, limit)


async def test_failures_are_journalled_reported_and_retried_by_a_rerun(
    make_context, index, tmp_path
):
    ctx = make_context(answering_model())
    ctx.search = FailingSearch(index)
    t, out = write_testset(tmp_path / "t.json", count=2), tmp_path / "sub.json"
    report = await run_batch(ctx, t, out, phase="A", progress=False)
    assert set(report.failed) == {"q1-0", "q2-1"} and report.answered == 0
    assert "ConnectionError: search backend down" in report.failed["q1-0"]
    assert "attempt 2" in report.failed["q1-0"]  # retried before giving up
    assert json.loads(out.read_text()) == {"questions": []}
    ctx.search.broken = False
    again = await run_batch(ctx, t, out, phase="A", progress=False)
    assert again.answered == 2 and not again.failed
    assert len(json.loads(out.read_text())["questions"]) == 2


async def test_rerun_skips_journalled_questions_and_survives_a_torn_line(make_context, tmp_path):
    t, out = write_testset(tmp_path / "t.json"), tmp_path / "sub.json"
    first = answering_model()
    await run_batch(make_context(first), t, out, phase="A", limit=2, progress=False)
    with open(journal_path(out), "a") as fh:
        fh.write('{"status": "ok", "id": "q3-2", "entr')  # a kill in the middle of a write
    second = answering_model()
    report = await run_batch(make_context(second), t, out, phase="A", progress=False)
    assert report.resumed == 2 and report.answered == 2
    assert len(second.calls) == 2  # one query per question not yet journalled
    ids = [e["id"] for e in json.loads(out.read_text())["questions"]]
    assert ids == ["q1-0", "q2-1", "q3-2", "q4-3"]
    third = answering_model()
    report = await run_batch(make_context(third), t, out, phase="A", progress=False)
    assert report.resumed == 4 and third.calls == []


async def test_a_journal_of_another_input_is_refused(make_context, tmp_path):
    out = tmp_path / "sub.json"
    await run_batch(
        make_context(answering_model()),
        write_testset(tmp_path / "t.json", count=1),
        out,
        phase="A",
        progress=False,
    )
    with pytest.raises(JournalMismatch, match="belongs to another input or phase"):
        await run_batch(
            make_context(answering_model()),
            write_testset(tmp_path / "t.json", count=1),
            out,
            phase="A+",
            progress=False,
        )


QUORUM = str(Path(sys.executable).parent / "quorum")


@pytest.mark.slow
def test_killed_three_times_then_resumed_answers_every_question_once(quorum_home, tmp_path):
    # The drill: 100 questions, kill -9 at three random points, then run to the end.
    count = 100
    t, out = write_testset(tmp_path / "t.json", count=count), tmp_path / "sub.json"
    with SimulatedEndpoint(0.05) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home)
        args = [QUORUM, "bioasq", "run", "--input", str(t), "--output", str(out), "--phase", "A+"]
        journal = journal_path(out)
        for kill_after in sorted(random.Random(6).sample(range(5, 95), 3)):
            proc = subprocess.Popen(
                args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                lines = journal.read_text().count("\n") if journal.exists() else 0
                if lines - 1 >= kill_after or proc.poll() is not None:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finished = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        assert finished.returncode == 0, finished.stderr
    records = [json.loads(line) for line in journal.read_text().splitlines()[1:] if line.strip()]
    answered = [r["id"] for r in records if r.get("status") == "ok"]
    assert sorted(answered) == sorted(set(answered))  # no question answered twice
    entries = json.loads(out.read_text())["questions"]
    assert len(entries) == count and len({e["id"] for e in entries}) == count
    assert "from the journal" in finished.stderr
    from infra.bioasq.validate import validate_file

    assert validate_file(out, testset_path=t, phase="A+") == []


async def test_a_phase_b_thread_reads_back_as_a_trace(make_context, settings, tmp_path):
    from graphs.traces.read import node_updates

    out = tmp_path / "b.json"
    await run_batch(
        make_context(answering_model()),
        write_testset(tmp_path / "t.json", snippets=True, count=1),
        out,
        phase="B",
        progress=False,
    )
    record = json.loads(journal_path(out).read_text().splitlines()[1])
    nodes = [s["node"] for s in node_updates(settings, record["thread_id"])]
    assert nodes[0] == "given_evidence" and nodes[-1] == "finalize"


async def test_report_scores_by_type_plots_and_compares_two_runs(make_context, tmp_path):
    from graphs.bioasq.report import score_run, write_report

    t = write_testset(tmp_path / "t.json")
    gold = json.loads(t.read_text())
    for q in gold["questions"]:
        q["documents"] = ["http://www.ncbi.nlm.nih.gov/pubmed/101"]
        q["snippets"] = []
        q["ideal_answer"] = ["Mitochondria act early in lace plant cell death."]
        q["exact_answer"] = {
            "yesno": "yes",
            "list": [["mitochondria"], ["vacuole"]],
            "factoid": [["areole cells"]],
        }.get(q["type"])
    for name in ("first", "second"):
        await run_batch(
            make_context(answering_model()),
            t,
            tmp_path / name / "submission.json",
            phase="A+",
            progress=False,
        )
    first, second = load_run(tmp_path / "first"), load_run(tmp_path / "second")
    for run in (first, second):
        score_run(run, gold)
    assert first.phase == "A+" and set(first.records) == {"q1-0", "q2-1", "q3-2", "q4-3"}
    assert first.scores["q1-0"]["score"] == 1.0  # yes/no right
    # list: "the vacuole" dropped as its citation does not carry it; 1 of 1 right, 1 of 2 found
    assert first.scores["q2-1"]["score"] == pytest.approx(2 / 3)
    assert first.scores["q3-2"]["score"] == 0.0  # factoid wrong
    figures = write_report(first, gold, tmp_path / "report", second)
    assert figures["guessed"] == 0  # every yes/no answered
    assert {
        "report.md",
        "report.html",
        "score_by_type.png",
        "confidence_vs_score.png",
        "latency_cost.png",
    } <= set(figures["files"])
    for name in figures["files"]:
        assert (tmp_path / "report" / name).stat().st_size > 100
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| yesno | 1 | accuracy 1.0000 |" in md and "first vs second" in md
    comparison = figures["comparison"]
    assert comparison["yesno_mcnemar"] == {"b": 0, "c": 0, "p_value": 1.0}  # identical runs
    assert comparison["list_f1_bootstrap"]["difference"] == 0.0


def journal_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in journal_path(out).read_text().splitlines()[1:]]


async def test_when_every_model_fails_the_question_is_failed_kept_honest_and_retried(
    make_context, tmp_path
):
    broken = script(
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=ConnectionError("endpoint down"),
        synthesize=ConnectionError("endpoint down"),
    )
    t, out = write_testset(tmp_path / "t.json", count=1), tmp_path / "sub.json"
    report = await run_batch(make_context(broken), t, out, phase="A+", progress=False)
    assert report.answered == 0 and not report.insufficient  # a model failure, not evidence
    assert list(report.failed) == ["q1-0"] and report.guessed == ["q1-0"]
    assert "ensemble: local model failed with no reply (" in report.failed["q1-0"]
    assert "returned ''" not in report.failed["q1-0"]  # no reply is not an empty reply
    (record,) = journal_records(out)
    assert record["status"] == "failed" and record["guessed"] is True
    assert record["entry"]["ideal_answer"].startswith("Insufficient evidence: no model could")
    (entry,) = json.loads(out.read_text())["questions"]
    assert entry == record["entry"] and entry["exact_answer"] == "yes"  # kept, marked a guess
    kept = answering_model()
    again = await run_batch(
        make_context(kept), t, out, phase="A+", keep_insufficient=True, progress=False
    )
    assert kept.calls and again.answered == 1  # failed is never kept: tried again
    assert not again.failed and not again.guessed
    assert journal_records(out)[-1]["status"] == "ok"
    (entry,) = json.loads(out.read_text())["questions"]
    assert entry["exact_answer"] == "yes" and entry["ideal_answer"] == "Mitochondria act early."


async def test_an_unanswered_yesno_is_written_as_configured_and_journalled_a_guess(
    make_context, settings, tmp_path
):
    # The members fail, synthesis answers: not a model failure, but no answer either.
    members_down = script(
        query={"query": "mitochondria OR lace OR cell"},
        organize={"duplicates": []},
        ensemble=ConnectionError("endpoint down"),
        synthesize=lambda m, kw: {
            "exact_answer": "yes",
            "ideal_answer": "Yes, they do so early.",
            "confidence": 0.9,
            "cited_pmids": pmids_in(m)[:1],
        },
    )
    chosen = settings.model_copy(update={"bioasq": BioasqSettings(unanswered_yesno="no")})
    ctx = make_context(members_down, settings_=chosen)
    t, out = write_testset(tmp_path / "t.json", count=1), tmp_path / "sub.json"
    report = await run_batch(ctx, t, out, phase="A+", progress=False)
    assert not report.failed and list(report.insufficient) == ["q1-0"]
    assert report.guessed == ["q1-0"]
    (record,) = journal_records(out)
    assert record["status"] == "insufficient" and record["guessed"] is True
    assert "no ensemble member gave a usable answer" in record["reason"]
    assert record["entry"]["exact_answer"] == "no"  # the setting's, not the model's "yes"
    assert json.loads(out.read_text())["questions"] == [record["entry"]]
    assert load_run(out).guessed == {"q1-0"}  # what `bioasq report` counts
    kept = answering_model()
    report = await run_batch(
        make_context(kept), t, out, phase="A+", keep_insufficient=True, progress=False
    )
    assert kept.calls == [] and report.resumed == 1 and report.guessed == ["q1-0"]
    again = await run_batch(make_context(answering_model()), t, out, phase="A+", progress=False)
    assert again.answered == 1 and not again.guessed and not again.insufficient
    assert load_run(out).guessed == set()


class StubGraph:
    """A GraphRunner's run, answering each with the next canned result and one 5-token call."""

    def __init__(self, *results: dict):
        self.results = list(results)
        self.runs = 0

    async def run(self, context, inputs, *, thread_id=None, metadata=None, progress=None):
        self.runs += 1
        calls = [{"input_tokens": 3, "output_tokens": 2}]
        return Outcome(thread_id or "t", {"result": self.results.pop(0), "calls": calls})


FACTOID = Question(id="f1", body="What forms the perforations?", type="factoid")


@pytest.mark.parametrize(
    ("exact", "ideal", "problem"),
    [
        ([], "][{", "is not a sentence"),
        ([], "Programmed cell death forms them.", "the factoid exact answer is empty"),
        ([["PCD"]], '{"answer": "programmed cell death"}', "is JSON, not prose"),
    ],
)
async def test_junk_is_never_journalled_ok_whatever_a_node_let_through(exact, ideal, problem):
    junk = {"type": "factoid", "exact_answer": exact, "ideal_answer": ideal, "insufficient": False}
    graph = StubGraph(junk, dict(junk))
    record = await _answer(graph, None, FACTOID, "B", attempts=2, unanswered_yesno="yes")
    assert graph.runs == 2  # junk is a failed synthesis: tried again first
    assert record["status"] == "insufficient" and record["insufficient"] is True
    assert problem in record["reason"] and record["attempt"] == 2
    entry = record["entry"]
    assert entry["ideal_answer"].startswith("Insufficient evidence: the answer broke the answer")
    assert entry["exact_answer"] == []
    assert validate_submission({"questions": [entry]}, phase="B") == []


async def test_a_good_second_try_is_journalled_ok():
    junk = {"type": "factoid", "exact_answer": [], "ideal_answer": "} {{"}
    good = {"type": "factoid", "exact_answer": [["PCD"]], "ideal_answer": "Cell death does."}
    record = await _answer(
        StubGraph(junk, good), None, FACTOID, "B", attempts=2, unanswered_yesno="yes"
    )
    assert record["status"] == "ok" and record["insufficient"] is False
    assert record["attempt"] == 2 and record["tokens"] == 10
    assert record["entry"]["exact_answer"] == [["PCD"]]


async def test_the_graphs_own_insufficient_verdict_is_not_rerun_in_the_same_batch():
    honest = {
        "type": "factoid",
        "exact_answer": [],
        "ideal_answer": "Insufficient evidence: no passage names the cells.",
        "insufficient": True,
        "insufficient_reason": "no passage names the cells",
    }
    graph = StubGraph(honest)
    record = await _answer(graph, None, FACTOID, "B", attempts=2, unanswered_yesno="yes")
    assert graph.runs == 1 and record["status"] == "insufficient"
    assert record["reason"] == "no passage names the cells"
    assert record["entry"]["ideal_answer"] == honest["ideal_answer"]


def test_the_journal_reads_back_statuses_in_order(tmp_path):
    path, header = tmp_path / "j.jsonl", {"journal": 1, "input_sha256": "x", "phase": "A+"}
    entry = {"id": "a", "ideal_answer": "Insufficient evidence: none."}
    journal = Journal(path, header)
    journal.record({"status": "insufficient", "id": "a", "entry": entry, "reason": "none"})
    journal.record({"status": "failed", "id": "b", "error": "boom"})
    journal.record({"status": "insufficient", "id": "b", "entry": entry, "reason": "none"})
    journal.record({"status": "insufficient", "id": "c", "entry": entry, "reason": "none"})
    journal.record({"status": "failed", "id": "c", "error": "boom"})
    journal.record({"status": "ok", "id": "d", "entry": {"id": "d"}})
    journal.close()
    again = Journal(path, header)
    again.close()
    for read in (journal, again):
        assert set(read.insufficient) == {"a", "b"} and set(read.failed) == {"c"}
        assert set(read.done) == {"d"} and set(read.stand_ins) == {"a", "b", "c"}


async def test_junk_an_older_quorum_journalled_ok_is_answered_again(make_context, tmp_path):
    t, out = write_testset(tmp_path / "t.json", count=3), tmp_path / "sub.json"
    await run_batch(make_context(answering_model()), t, out, phase="A+", progress=False)
    lines = journal_path(out).read_text().splitlines()
    junk = json.loads(lines[2])  # q2-1, a list question
    junk["entry"] |= {"exact_answer": [], "ideal_answer": "][{"}
    lines[2] = json.dumps(junk)
    journal_path(out).write_text("\n".join(lines) + "\n")
    model = answering_model()
    report = await run_batch(make_context(model), t, out, phase="A+", progress=False)
    assert report.resumed == 2 and report.answered == 1 and model.calls
    by_id = {e["id"]: e for e in json.loads(out.read_text())["questions"]}
    assert by_id["q2-1"]["exact_answer"] == [["mitochondria"]]


async def test_the_journal_records_each_answers_support_and_the_report_counts_it(
    make_context, settings, tmp_path
):
    from graphs.bioasq.report import support_counts

    t = write_testset(tmp_path / "t.json")
    demo = tmp_path / "demo" / "sub.json"  # the demo settings: the verifier is off
    await run_batch(make_context(answering_model()), t, demo, phase="A+", progress=False)
    records = journal_records(demo)
    given = [r for r in records if r["status"] == "ok"]
    assert given and all(r["support"]["verified"] == "not verified" for r in given)
    assert all(r["support"]["verdict"] == "supported" for r in given)
    assert all(set(r["support"]) >= {"verdict", "verified", "judge", "relevance"} for r in records)
    counts = support_counts(load_run(demo))
    assert counts["given"] == len(given) and counts["not_verified"] == len(given)
    # One model answers and judges: every given answer is self-verified, and counted so.
    chosen = settings.model_copy(
        update={"verify": settings.verify.model_copy(update={"enabled": "on"})}
    )
    alone = tmp_path / "alone" / "sub.json"
    await run_batch(
        make_context(answering_model(), settings_=chosen), t, alone, phase="A+", progress=False
    )
    given = [r for r in journal_records(alone) if r["status"] == "ok"]
    assert given and all(r["support"]["verified"] == "self-verified" for r in given)
    assert all(r["support"]["judge"] == "self" and r["support"]["verifier"] for r in given)
    counts = support_counts(load_run(alone))
    assert counts["self_verified"] == counts["given"] == len(given) and counts["verified"] == 0
