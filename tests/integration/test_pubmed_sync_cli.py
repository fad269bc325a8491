"""`quorum pubmed sync` end to end against a local HTTP server laid out like NCBI's PubMed site:
baseline/ and updatefiles/ with HTML listings and .md5 files; a corrupt file, a transfer cut
short, a 404, a server that stalls, a kill mid-file, revisions and deletions in an update."""

import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from infra.search.embedded import EmbeddedIndex
from lab.simulate.server import SimulatedEndpoint
from tests.support.cli import QUORUM, quorum_env, run_quorum, simulated_env
from tests.support.pubmed_xml import article as xml_article
from tests.support.pubmed_xml import pubmed_set


def article(pmid: str, title: str, abstract: str) -> str:
    return xml_article(pmid, title, abstract, mesh=("Mitochondria",))


def padding(seed: int, words: int) -> str:
    """Random words: a file that compresses badly, so it is big enough to kill mid-transfer."""
    rng = random.Random(seed)
    return " ".join(
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(words)
    )


B1, B2, B3 = (f"pubmed25n000{i}.xml.gz" for i in (1, 2, 3))
U1 = "pubmed25n0004.xml.gz"
ABSTRACT = "Mitochondria remodel lace plant leaves during programmed cell death."


def layout(root: Path, *, big: bool = False) -> dict[str, bytes]:
    """Write a mirror: three baseline files and one update that revises 2 and deletes 3 and 5."""
    files = {
        f"baseline/{B1}": pubmed_set(
            [article(str(p), f"Baseline title {p}", ABSTRACT) for p in (1, 2, 3)]
        ),
        f"baseline/{B2}": pubmed_set(
            [article("4", "Baseline title 4", ABSTRACT + " " + padding(4, 60_000 if big else 50))]
        ),
        f"baseline/{B3}": pubmed_set([article("5", "Baseline title 5", ABSTRACT)]),
        f"updatefiles/{U1}": pubmed_set(
            [
                article("2", "Revised lace plant title", ABSTRACT),
                article("6", "Update only title", ABSTRACT),
            ],
            deleted=("3", "5"),
        ),
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        name = path.name
        (root / (rel + ".md5")).write_text(f"MD5({name})= {hashlib.md5(data).hexdigest()}\n")
    return files


class NcbiLike:
    """A threaded HTTP server over `root`: directory listings, Range requests, scripted faults.

    faults: file name → "stall" (headers and a little, then nothing), "cut" (Content-Length
    says more than is sent, every time), "cut_once", "slow" (a trickle), "404".
    """

    def __init__(self, root: Path):
        self.root = root
        self.faults: dict[str, str] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.agents: set[str] = set()
        self.release = threading.Event()
        self.slow_bytes_per_s = 20_000
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                server.agents.add(self.headers.get("User-Agent", ""))
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/pubmed/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def gets(self, name: str) -> list[str | None]:
        """Return the Range header of every GET of the data file `name`."""
        return [r for p, r in self.requests if p.endswith("/" + name)]

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        rel = h.path.removeprefix("/pubmed/")
        path = self.root / rel
        fault = self.faults.get(path.name)
        if rel.endswith("/") and path.is_dir():
            links = "".join(
                f'<a href="{p.name}">{p.name}</a>   2024-12-17 14:05  1.0K\n'
                for p in sorted(path.iterdir())
            )
            body = (
                f"<html><head><title>Index of /pubmed/{rel}</title></head><body><pre>"
                f'<a href="/pubmed/">Parent Directory</a>\n{links}</pre></body></html>'
            ).encode()
            return self.send(h, 200, body, "text/html")
        if fault == "404" or not path.is_file():
            return self.send(h, 404, b"<html>404 Not Found</html>", "text/html")
        data = path.read_bytes()
        start = (
            int(h.headers["Range"].removeprefix("bytes=").rstrip("-"))
            if h.headers.get("Range")
            else 0
        )
        if start >= len(data):
            return self.send(h, 416, b"", "text/plain")
        status, body = (206, data[start:]) if start else (200, data)
        if fault == "cut_once":
            del self.faults[path.name]
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(len(body)))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if fault in ("cut", "cut_once"):
            h.wfile.write(body[: len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            return
        if fault == "stall":
            h.wfile.write(body[:10])
            h.wfile.flush()
            self.release.wait(30)
            h.close_connection = True
            return
        step = 2048
        for i in range(0, len(body), step):
            h.wfile.write(body[i : i + step])
            if fault == "slow":
                h.wfile.flush()
                time.sleep(step / self.slow_bytes_per_s)
        h.wfile.flush()

    @staticmethod
    def send(h: BaseHTTPRequestHandler, status: int, body: bytes, kind: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", kind)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


@pytest.fixture
def ncbi(tmp_path) -> Iterator[NcbiLike]:
    server = NcbiLike(tmp_path / "mirror")
    layout(server.root)
    server.thread.start()
    yield server
    server.release.set()
    server.httpd.shutdown()
    server.httpd.server_close()


def sync_args(ncbi: NcbiLike, *extra: str) -> list[str]:
    return [QUORUM, "pubmed", "sync", "--mirror", ncbi.url, "--index", "pm", "--no-embeddings",
            "--json", "--rate", "10", "--timeout", "2", "--retries", "1", *extra]  # fmt: skip


def sync(home: Path, ncbi: NcbiLike, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        sync_args(ncbi, *extra),
        capture_output=True,
        text=True,
        env=quorum_env(home) | env,
        timeout=120,
    )


def summary(done: subprocess.CompletedProcess) -> dict:
    return json.loads(done.stdout)


def searched(home: Path, query: str) -> list[str]:
    return list(EmbeddedIndex(home / "indexes" / "pm").search(query, 20).pmids)


def titles(home: Path, *pmids: str) -> dict[str, str]:
    return {d["pmid"]: d["title"] for d in EmbeddedIndex(home / "indexes" / "pm").fetch(pmids)}


def state(home: Path) -> list[str]:
    path = home / "pubmed" / "embedded-pm" / "state.json"
    return [a["name"] for a in json.loads(path.read_text())["applied"]]


def test_baseline_and_update_apply_in_order_and_a_second_run_fetches_nothing(tmp_path, ncbi):
    home = tmp_path / "home"
    done = sync(home, ncbi, QUORUM_FALLBACK__EMAIL="curator@example.org")
    assert done.returncode == 0, done.stderr
    assert summary(done) == {
        "files_downloaded": 4,
        "files_applied": 4,
        "records": 7,  # 5 baseline articles, the revision of 2 and the new 6
        "deleted": 2,
        "skipped": 0,
    }
    assert state(home) == [B1, B2, B3, U1]
    assert sorted(searched(home, "mitochondria"), key=int) == ["1", "2", "4", "6"]
    assert searched(home, "title") and "3" not in searched(home, "title")
    assert titles(home, "2", "3", "5") == {"2": "Revised lace plant title"}
    assert searched(home, "revised") == ["2"]
    assert not list((home / "pubmed" / "embedded-pm" / "files").glob("*.xml.gz"))
    data_gets = [p for p, _ in ncbi.requests if p.endswith(".xml.gz")]
    assert sorted(data_gets) == sorted(set(data_gets)) and len(data_gets) == 4
    assert len(ncbi.agents) == 1 and "mailto:curator@example.org" in ncbi.agents.pop()

    ncbi.requests.clear()
    again = sync(home, ncbi)
    assert again.returncode == 0, again.stderr
    assert summary(again) == dict.fromkeys(summary(again), 0)
    assert [p for p, _ in ncbi.requests] == ["/pubmed/baseline/", "/pubmed/updatefiles/"]
    assert "4 files applied before" in again.stderr

    # A new daily file appears: only it is fetched and applied.
    new = "pubmed25n0005.xml.gz"
    data = pubmed_set([article("7", "Newest lace plant paper", ABSTRACT)], deleted=("1",))
    (ncbi.root / "updatefiles" / new).write_bytes(data)
    (ncbi.root / "updatefiles" / (new + ".md5")).write_text(
        f"MD5({new})= {hashlib.md5(data).hexdigest()}\n"
    )
    third = sync(home, ncbi)
    assert summary(third) == {
        "files_downloaded": 1, "files_applied": 1, "records": 1, "deleted": 1, "skipped": 0
    }  # fmt: skip
    assert sorted(searched(home, "mitochondria"), key=int) == ["2", "4", "6", "7"]


def test_until_stops_at_the_named_file_and_an_unknown_one_is_wrong_input(tmp_path, ncbi):
    home = tmp_path / "home"
    done = sync(home, ncbi, "--until", "pubmed25n0002")
    assert done.returncode == 0, done.stderr
    assert summary(done)["files_applied"] == 2 and state(home) == [B1, B2]
    assert sorted(searched(home, "mitochondria"), key=int) == ["1", "2", "3", "4"]
    # The index gone, its recorded files are applied again rather than trusted.
    shutil.rmtree(home / "indexes" / "pm")
    rebuilt = sync(home, ncbi, "--until", "pubmed25n0002.xml.gz")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "index embedded:pm does not exist; applying the 2 files recorded" in rebuilt.stderr
    assert summary(rebuilt)["files_applied"] == 2 and summary(rebuilt)["records"] == 4
    bad = sync(home, ncbi, "--until", "pubmed19n0999.xml.gz")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "--until 'pubmed19n0999.xml.gz': the mirror lists no such file" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) <= 2


def test_a_corrupt_file_is_named_and_nothing_of_it_indexed(tmp_path, ncbi):
    home = tmp_path / "home"
    (ncbi.root / "updatefiles" / (U1 + ".md5")).write_text(f"MD5({U1})= {'0' * 32}\n")
    done = sync(home, ncbi)
    assert done.returncode == 1
    assert f"quorum: error: {U1}: MD5 mismatch" in done.stderr and "Traceback" not in done.stderr
    assert summary(done)["files_applied"] == 3 and state(home) == [B1, B2, B3]
    assert titles(home, "2", "3", "6") == {"2": "Baseline title 2", "3": "Baseline title 3"}
    # Fixed on the mirror, the next run fetches it anew and applies it alone.
    data = (ncbi.root / "updatefiles" / U1).read_bytes()
    (ncbi.root / "updatefiles" / (U1 + ".md5")).write_text(
        f"MD5({U1})= {hashlib.md5(data).hexdigest()}\n"
    )
    again = sync(home, ncbi)
    assert again.returncode == 0, again.stderr
    assert summary(again)["files_applied"] == 1 and state(home)[-1] == U1
    assert titles(home, "2", "3", "6") == {
        "2": "Revised lace plant title",
        "6": "Update only title",
    }


def test_a_404_names_the_url_and_earlier_files_stay_applied(tmp_path, ncbi):
    home = tmp_path / "home"
    ncbi.faults[B3] = "404"
    done = sync(home, ncbi)
    assert done.returncode == 1
    assert f"{ncbi.url}baseline/{B3}: not found (404)" in done.stderr
    assert state(home) == [B1, B2] and summary(done)["files_applied"] == 2


def test_a_transfer_cut_short_resumes_and_one_always_cut_fails_naming_it(tmp_path, ncbi):
    home = tmp_path / "home"
    ncbi.faults[B2] = "cut_once"
    done = sync(home, ncbi)
    assert done.returncode == 0, done.stderr
    gets = ncbi.gets(B2)
    assert len(gets) == 2 and gets[0] is None and gets[1].startswith("bytes=")
    assert titles(home, "4")["4"] == "Baseline title 4"

    other = tmp_path / "other"
    ncbi.faults[B1] = "cut"
    failed = sync(other, ncbi)
    assert failed.returncode == 1
    assert f"baseline/{B1}: the transfer broke off" in failed.stderr
    assert "Traceback" not in failed.stderr and summary(failed)["files_applied"] == 0
    assert not (other / "indexes" / "pm").exists()  # no empty index left behind


def test_a_stalled_server_times_out_naming_the_file(tmp_path, ncbi):
    home = tmp_path / "home"
    ncbi.faults[U1] = "stall"
    started = time.monotonic()
    done = sync(home, ncbi, "--timeout", "1")
    assert done.returncode == 1
    assert time.monotonic() - started < 60
    assert f"updatefiles/{U1}: the mirror stopped answering" in done.stderr
    assert state(home) == [B1, B2, B3]
    assert len(ncbi.gets(U1)) == 2  # one retry, resuming with a Range request
    assert ncbi.gets(U1)[1] is not None


def test_wrong_input_is_one_line_and_exit_2(tmp_path, ncbi):
    home = tmp_path / "home"
    env = quorum_env(home)
    for args, words in (
        (["--mirror", "ftp://ftp.ncbi.nlm.nih.gov/pubmed/"], "is not an http(s) URL"),
        (["--mirror", ncbi.url + "nowhere/"], "baseline/ does not exist (404)"),
        (["--backend", "solr"], "unknown --backend 'solr'"),
    ):
        done = subprocess.run(
            [QUORUM, "pubmed", "sync", "--index", "pm", *args],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert words in done.stderr and "Traceback" not in done.stderr


def test_a_second_sync_into_the_same_index_waits_its_turn(tmp_path, ncbi):
    home = tmp_path / "home"
    folder = home / "pubmed" / "embedded-pm"
    folder.mkdir(parents=True)
    with open(folder / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = sync(home, ncbi)
    assert done.returncode == 2 and done.stdout == ""
    assert "another `quorum pubmed sync` into embedded:pm is running" in done.stderr
    assert ncbi.requests == []


def test_a_mirror_that_is_down_is_exit_1(tmp_path):
    done = subprocess.run(
        [QUORUM, "pubmed", "sync", "--mirror", "http://127.0.0.1:9/pubmed/", "--retries", "0"],
        capture_output=True, text=True, env=quorum_env(tmp_path), timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "cannot connect" in done.stderr and "Traceback" not in done.stderr


def test_killed_mid_file_resumes_without_fetching_a_finished_file_twice(tmp_path):
    home = tmp_path / "home"
    ncbi = NcbiLike(tmp_path / "mirror")
    layout(ncbi.root, big=True)
    ncbi.faults[B2] = "slow"
    ncbi.thread.start()
    try:
        folder = home / "pubmed" / "embedded-pm"
        part = folder / "files" / (B2 + ".part")
        proc = subprocess.Popen(
            sync_args(ncbi), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=quorum_env(home)
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            part.exists() and part.stat().st_size > 0 and (folder / "files" / B3).exists()
            and (folder / "state.json").exists() and B1 in state(home)
        ):  # fmt: skip
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        size = part.stat().st_size
        assert 0 < size < (ncbi.root / "baseline" / B2).stat().st_size
        assert state(home) == [B1]
        # U1 (small) may have been verified too while B2 trickled: then it is not fetched again.
        u1_fetched_before = (folder / "files" / U1).exists()

        del ncbi.faults[B2]
        done = sync(home, ncbi)
        assert done.returncode == 0, done.stderr
        # B2 resumed, U1 unless it was verified before the kill; B3 had been verified.
        assert summary(done)["files_downloaded"] == 2 - u1_fetched_before
        assert summary(done)["files_applied"] == 3
        assert ncbi.gets(B1) == [None] and ncbi.gets(B3) == [None] and ncbi.gets(U1) == [None]
        assert ncbi.gets(B2) == [None, f"bytes={size}-"]
        assert state(home) == [B1, B2, B3, U1]
        assert sorted(searched(home, "mitochondria"), key=int) == ["1", "2", "4", "6"]
    finally:
        ncbi.release.set()
        ncbi.httpd.shutdown()
        ncbi.httpd.server_close()


def test_an_index_synced_without_embeddings_answers_at_once_in_bm25_order(tmp_path, ncbi):
    home = tmp_path / "home"
    assert sync(home, ncbi).returncode == 0
    question = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"
    with SimulatedEndpoint(0.0) as endpoint:
        env = simulated_env(endpoint.base_url, home, QUORUM_MODELS__CACHE="off")
        asked = run_quorum(env, "ask", question, "--index", "pm", "--json", timeout=300)
        assert asked.returncode == 0, asked.stderr
        answer = json.loads(asked.stdout)
        steps = run_quorum(env, "trace", "show", answer["thread_id"], "--json", timeout=120)
    assert steps.returncode == 0, steps.stderr
    assert set(answer["documents"]) == {"1", "2", "4", "6"}  # 3 and 5 were deleted
    updates = json.loads(steps.stdout)
    searched_last = [s["update"] for s in updates if s["node"] == "search"][-1]
    rerank = next(s["update"] for s in updates if s["node"] == "rerank")
    assert "rerank: the index stores no document vectors; kept BM25 order" in rerank["notes"]
    assert [p for p, _ in rerank["ranked"]] == [p for p, _ in searched_last["candidates"]]


def test_elasticsearch_takes_the_same_sync(tmp_path, ncbi, es_url, new_name):
    from infra.search.elastic import ElasticIndex

    home, name = tmp_path / "home", new_name()
    args = ("--backend", "elasticsearch", "--index", name)
    es = {"QUORUM_SEARCH__ELASTICSEARCH_URL": es_url}
    done = sync(home, ncbi, *args, **es)
    assert done.returncode == 0, done.stderr
    assert summary(done) == {
        "files_downloaded": 4, "files_applied": 4, "records": 7, "deleted": 2, "skipped": 0
    }  # fmt: skip
    index = ElasticIndex(es_url, name)
    assert sorted(index.search("mitochondria", 20).pmids, key=int) == ["1", "2", "4", "6"]
    assert {d["pmid"]: d["title"] for d in index.fetch(["2", "3", "5"])} == {
        "2": "Revised lace plant title"
    }
    again = sync(home, ncbi, *args, **es)
    assert again.returncode == 0, again.stderr
    assert summary(again)["files_downloaded"] == 0 and summary(again)["files_applied"] == 0
    assert (home / "pubmed" / f"elasticsearch-{name}" / "state.json").exists()


def test_a_failed_sync_into_elasticsearch_leaves_what_it_applied_searchable(
    tmp_path, ncbi, es_url, new_name, admin
):
    from infra.search.elastic import ElasticIndex

    name = new_name()
    (ncbi.root / "updatefiles" / (U1 + ".md5")).write_text(f"MD5({U1})= {'0' * 32}\n")
    done = sync(
        tmp_path / "home",
        ncbi,
        *("--backend", "elasticsearch", "--index", name),
        QUORUM_SEARCH__ELASTICSEARCH_URL=es_url,
    )
    assert done.returncode == 1 and f"{U1}: MD5 mismatch" in done.stderr
    # The bulk load ended before the exit: refresh is back on and the baseline shows.
    index_settings = admin.indices.get_settings(index=name)[name]["settings"]["index"]
    assert index_settings.get("refresh_interval") != "-1"
    index = ElasticIndex(es_url, name)
    assert sorted(index.search("mitochondria", 20).pmids, key=int) == ["1", "2", "3", "4", "5"]


def test_ctrl_c_mid_file_leaves_at_once_and_the_next_run_resumes(tmp_path):
    home = tmp_path / "home"
    ncbi = NcbiLike(tmp_path / "mirror")
    layout(ncbi.root, big=True)
    ncbi.faults[B2] = "slow"
    ncbi.thread.start()
    try:
        part = home / "pubmed" / "embedded-pm" / "files" / (B2 + ".part")
        proc = subprocess.Popen(
            sync_args(ncbi, "--timeout", "30"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=quorum_env(home),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (part.exists() and part.stat().st_size):
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - started < 10  # not held up by the trickling transfer
        assert proc.returncode == 130, err
        assert "interrupted; run the same command again to resume" in err
        assert json.loads(out)["files_applied"] <= 1
        del ncbi.faults[B2]
        done = sync(home, ncbi)
        assert done.returncode == 0, done.stderr
        assert state(home) == [B1, B2, B3, U1]
        assert ncbi.gets(B2)[-1].startswith("bytes=")
    finally:
        ncbi.release.set()
        ncbi.httpd.shutdown()
        ncbi.httpd.server_close()
