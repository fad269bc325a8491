"""Ctrl-C: the first finishes what is in flight and starts nothing new, the second stops now."""

import json
import re
import signal
import subprocess
import threading
import time

from graphs.bioasq.journal import journal_path
from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import QUORUM, run_quorum, simulated_env

# Worded for this file alone: the integration session's quorum_home holds other files' runs.
QUESTION = "Is programmed cell death in lace plant leaves stopped when ask is interrupted?"


class Running:
    """A `quorum` process whose stderr lines are read as they come, with their times."""

    def __init__(self, args, env):
        self.proc = subprocess.Popen(
            [QUORUM, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # As a terminal's foreground job: Ctrl-C not ignored, whatever this process inherited
            # (an ignored signal stays ignored across exec, and quorum keeps an inherited ignore).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, test, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if test():
                return
            time.sleep(0.05)
        raise AssertionError(f"never happened; stderr: {[t for _, t in self.lines]}")

    def said(self, text):
        return next((t for t, line in self.lines if text in line), None)


def _records(journal):
    return [json.loads(x) for x in journal.read_text().splitlines()[1:] if x.strip()]


BATCH = [
    "Do mitochondria play a role in lace plant programmed cell death?",
    "Does programmed cell death form the perforations of lace plant leaves?",
    "Do mitochondrial dynamics change as programmed cell death progresses in lace plant leaves?",
    "Does cyclosporine A lower the number of perforations in lace plant leaves?",
    "Do chloroplasts move on transvacuolar strands during lace plant programmed cell death?",
]
"""Yes/no questions the demo corpus's lace plant abstract (PMID 21645374) answers, each worded
apart so that no question is answered from another's cached calls. The simulated reader writes
"simulated" for a list or factoid answer, which no passage carries: only its yes/no answers can
be supported, so a question that finishes is one that is answered (status ok)."""
ON_THE_QUESTION = {"QUORUM_SEARCH__DENSE_CANDIDATES": "10"}
"""The simulated reader's query is "simulated", and BM25 finds abstracts about simulation with
it, which the support check rightly refuses as off the question (infra/relevance.py): the dense
first stage adds the abstracts nearest the question itself, the lace plant's among them."""


def write_batch(path):
    questions = [{"id": f"y{i}", "body": body, "type": "yesno"} for i, body in enumerate(BATCH)]
    path.write_text(json.dumps({"questions": questions}))
    return path


def test_the_first_ctrl_c_finishes_the_question_in_flight_and_starts_no_other(
    quorum_home, tmp_path
):
    testset, out = write_batch(tmp_path / "t.json"), tmp_path / "sub.json"
    journal = journal_path(out)
    args = ["bioasq", "run", "--input", str(testset), "--output", str(out), "--phase", "A+"]
    with SimulatedEndpoint(0.5) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home, **ON_THE_QUESTION)
        run = Running(args, env)
        run.wait_for(lambda: journal.exists() and len(_records(journal)) >= 1)
        run.proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        code = run.proc.wait(timeout=300)
        said = run.said("interrupt: finishing the questions in flight")
        assert said is not None and said - sent < 1.0, run.lines  # at once
        assert code == 130
        done = _records(journal)
        # The Ctrl-C lands after the first answer is journaled: the second question is then in
        # flight (and finishes), or, if the signal came before it started, none is; either way
        # every question is either answered or said not started, and none starts after.
        left = next(
            (
                int(m.group(1))
                for _, line in run.lines
                if (m := re.search(r"interrupted: (\d+) question\(s\) not started", line))
            ),
            None,
        )
        assert left in (3, 4), run.lines
        assert len(done) == 5 - left and all(r["status"] == "ok" for r in done)
        again = subprocess.run(
            [QUORUM, *args], env=env, capture_output=True, text=True, timeout=600
        )
    assert again.returncode == 0, again.stderr
    assert f"{len(done)} from the journal" in again.stderr
    assert len(json.loads(out.read_text())["questions"]) == 5


def test_a_second_ctrl_c_stops_within_a_second_and_the_run_reads_interrupted(quorum_home):
    with SimulatedEndpoint(2.0) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off")
        run = Running(["ask", QUESTION], env)
        run.wait_for(lambda: any("✓" in line for _, line in run.lines))  # a node has finished
        run.proc.send_signal(signal.SIGINT)
        run.wait_for(lambda: run.said("Ctrl-C again to stop now") is not None, timeout=5)
        run.proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        code = run.proc.wait(timeout=10)
        assert time.monotonic() - sent < 1.0
        assert code == 130 and run.proc.stdout.read() == ""
        listed = json.loads(run_quorum(env, "trace", "list", "--json", timeout=120).stdout)
    assert [t["status"] for t in listed if t["question"] == QUESTION] == ["interrupted"]


def test_one_ctrl_c_stops_ask_before_any_further_step(quorum_home):
    # Issue 48: one Ctrl-C used to print "finishing this question…", then run synthesis and the
    # fallback and print a full answer 21.6 s later, exit 0. Now no node starts after it.
    asked = f"{QUESTION} (stopped once)"  # its own run in the shared home
    with SimulatedEndpoint(2.0) as endpoint:
        env = simulated_env(endpoint.base_url, quorum_home, QUORUM_MODELS__CACHE="off")
        run = Running(["ask", asked], env)
        run.wait_for(lambda: any("✓" in line for _, line in run.lines))  # a node has finished
        run.proc.send_signal(signal.SIGINT)
        code = run.proc.wait(timeout=60)
        said = [line for _, line in run.lines]
        assert code == 130 and run.proc.stdout.read() == "", said
        assert any("stopped; nothing was answered" in line for line in said), said
        after = said[next(i for i, line in enumerate(said) if "interrupt:" in line) :]
        # What was in flight may finish; nothing after it starts: no ensemble, no synthesis.
        assert not any("ensemble" in line or "synthes" in line for line in after), said
        listed = json.loads(run_quorum(env, "trace", "list", "--json", timeout=120).stdout)
    assert [t["status"] for t in listed if t["question"] == asked] == ["interrupted"]
