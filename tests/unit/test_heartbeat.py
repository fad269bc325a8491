"""Long work off a terminal: a progress line at least every `every` seconds, none on a terminal."""

import io
import os
import re
import time

from infra.heartbeat import Heartbeat


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_off_a_terminal_a_line_comes_every_interval_with_the_work_done_so_far():
    stream, done = io.StringIO(), [0]
    with Heartbeat(lambda: f"indexing: {done[0]:,} documents", every=0.1, stream=stream):
        for _ in range(5):
            done[0] += 1000
            time.sleep(0.1)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3
    assert all(re.fullmatch(r"quorum: indexing: [\d,]+ documents \(\d+ s\)", x) for x in lines)
    assert lines[-1] != lines[0]  # the count moves on


def test_on_a_terminal_nothing_is_printed_the_bar_does_the_work():
    stream = _Terminal()
    with Heartbeat(lambda: "x", every=0.05, stream=stream):
        time.sleep(0.2)
    assert stream.getvalue() == ""


def test_a_failing_description_never_stops_the_beat():
    stream = io.StringIO()

    def broken():
        raise KeyError("n")

    with Heartbeat(broken, every=0.05, stream=stream):
        time.sleep(0.2)
    assert "working (KeyError reading progress)" in stream.getvalue()


def test_the_beat_ends_with_the_work():
    stream = io.StringIO()
    with Heartbeat(lambda: "x", every=0.05, stream=stream):
        time.sleep(0.12)
    count = len(stream.getvalue().splitlines())
    time.sleep(0.2)
    assert len(stream.getvalue().splitlines()) == count


def test_quorum_index_off_a_terminal_says_how_far_it_got(tmp_path, monkeypatch, capsys):
    import importlib
    import json

    import infra.heartbeat
    from infra.ingest import session

    monkeypatch.setattr(infra.heartbeat, "EVERY_S", 0.05)
    real = session.ingest

    def slow_ingest(*args, on_progress, **kwargs):  # each batch takes a while, as at scale
        def progress(docs, deletions):
            time.sleep(0.1)
            on_progress(docs, deletions)

        return real(*args, on_progress=progress, **kwargs)

    module = importlib.import_module("graphs.cli.index")  # graphs.cli.index is also a function
    monkeypatch.setattr(session, "ingest", slow_ingest)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"pmid": str(i), "title": "t", "abstract": f"aspirin {i}"}) + "\n"
            for i in range(1, 41)
        )
    )
    for key in [k for k in os.environ if k.startswith("QUORUM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("QUORUM_HOME", str(tmp_path / "home"))
    module.index([corpus], name="beat", embeddings=False, batch_size=10, commit_every=10)
    said = capsys.readouterr().err
    assert "indexed 40 documents" in said
    lines = [x for x in said.splitlines() if x.startswith("quorum: indexing")]
    assert lines and re.fullmatch(
        r"quorum: indexing: \d+ documents, 0 deleted \(\d+ s\)", lines[-1]
    )
