"""`quorum pubmed sync`'s parts: listings, checksums, the state file, file order, --until, fetching
with resume and verification (httpx's mock transport), and applying in order."""

import hashlib
import json
import threading
from pathlib import Path

import httpx
import pytest

from infra.pubmed.mirror import (
    BadMirror,
    ChecksumMismatch,
    Mirror,
    NotFound,
    RemoteFile,
    SyncError,
    mirror_url,
    parse_listing,
    parse_md5,
)
from infra.pubmed.sync import Applied, SyncState, SyncSummary, plan, sync, until_index
from infra.pubmed.xml import iter_pubmed_articles
from tests.support.pubmed_xml import article, pubmed_set

BASE = "https://mirror.test/pubmed/"

NCBI_LISTING = """<html><head><title>Index of /pubmed/updatefiles</title></head><body>
<h1>Index of /pubmed/updatefiles</h1><pre>Name Last modified Size
<hr><a href="/pubmed/">Parent Directory</a>
<a href="README.txt">README.txt</a>  2024-12-17 12:00  2.1K
<a href="pubmed25n1275.xml.gz">pubmed25n1275.xml.gz</a>  2024-12-18 14:05  2.4M
<a href="pubmed25n1275.xml.gz.md5">pubmed25n1275.xml.gz.md5</a>  2024-12-18 14:05  60
<a href="pubmed25n1276.xml.gz">pubmed25n1276.xml.gz</a>  2024-12-19 14:05  9.1M
<a href="pubmed25n1276.xml.gz.md5">pubmed25n1276.xml.gz.md5</a>
<a href='/pubmed/updatefiles/pubmed25n1277.xml.gz'>pubmed25n1277.xml.gz</a>
<a href="pubmed25n1277.xml.gz.md5">pubmed25n1277.xml.gz.md5</a>
<a href="stats.html">stats.html</a>
<a href="pubmed25n0010.xml.gz.md5">a checksum with no data file</a>
</pre></body></html>"""


def pubmed_gz(path: Path, articles: list[str], deleted: list[str] = ()) -> bytes:
    data = pubmed_set(articles, deleted)
    path.write_bytes(data)
    return data


def md5_line(name: str, data: bytes) -> str:
    return f"MD5({name})= {hashlib.md5(data).hexdigest()}\n"


def test_listing_keeps_data_files_in_file_order_and_resolves_links():
    url = BASE + "updatefiles/"
    files = parse_listing(NCBI_LISTING, url, "updatefiles")
    assert [f.name for f in files] == [
        "pubmed25n1275.xml.gz",
        "pubmed25n1276.xml.gz",
        "pubmed25n1277.xml.gz",
    ]
    assert files[2].url == "https://mirror.test/pubmed/updatefiles/pubmed25n1277.xml.gz"
    assert files[0].md5_url == url + "pubmed25n1275.xml.gz.md5"


def test_order_is_baseline_first_then_year_then_number():
    files = [
        RemoteFile("pubmed25n1275.xml.gz", "updatefiles", "u"),
        RemoteFile("pubmed25n0002.xml.gz", "baseline", "b"),
        RemoteFile("pubmed25n0010.xml.gz", "baseline", "b"),
        RemoteFile("pubmed24n1300.xml.gz", "updatefiles", "u"),
        RemoteFile("pubmed25n0001.xml.gz", "baseline", "b"),
    ]
    assert [f.name for f in sorted(files, key=lambda f: f.order)] == [
        "pubmed25n0001.xml.gz",
        "pubmed25n0002.xml.gz",
        "pubmed25n0010.xml.gz",
        "pubmed24n1300.xml.gz",
        "pubmed25n1275.xml.gz",
    ]


def test_md5_file_in_openssl_and_md5sum_form():
    digest = "0123456789abcdef0123456789ABCDEF"
    assert parse_md5(f"MD5(pubmed25n0001.xml.gz)= {digest}\n", "pubmed25n0001.xml.gz") == (
        digest.lower()
    )
    assert parse_md5(f"{digest}  pubmed25n0001.xml.gz\n", "pubmed25n0001.xml.gz") == digest.lower()
    with pytest.raises(SyncError, match="does not hold a checksum"):
        parse_md5(f"MD5(pubmed25n0002.xml.gz)= {digest}\n", "pubmed25n0001.xml.gz")
    with pytest.raises(SyncError):
        parse_md5("<html>Not Found</html>", "pubmed25n0001.xml.gz")


def test_mirror_url_takes_http_s_only_and_ends_in_a_slash():
    assert mirror_url("http://127.0.0.1:8000/pubmed") == "http://127.0.0.1:8000/pubmed/"
    for bad in ("ftp://ftp.ncbi.nlm.nih.gov/pubmed/", "/local/pubmed", "https://"):
        with pytest.raises(BadMirror, match="not an http"):
            mirror_url(bad)


def test_state_file_round_trips_and_is_written_atomically(tmp_path):
    path = tmp_path / "sync" / "state.json"
    state = SyncState(path)
    assert state.applied == {}
    state.record("pubmed25n0001.xml.gz", "a" * 32, Applied(records=3, deleted=0, skipped=1))
    state.record("pubmed25n0002.xml.gz", "b" * 32, Applied(records=2, deleted=1))
    assert not path.with_name("state.json.tmp").exists()
    again = SyncState(path)
    assert list(again.applied) == ["pubmed25n0001.xml.gz", "pubmed25n0002.xml.gz"]
    assert again.applied["pubmed25n0002.xml.gz"]["deleted"] == 1
    assert json.loads(path.read_text())["version"] == 1
    again.reset()
    assert SyncState(path).applied == {}


def listed(*names: str) -> list[RemoteFile]:
    return [
        RemoteFile(n, "updatefiles" if n >= "pubmed25n1275" else "baseline", BASE + n)
        for n in names
    ]


def test_plan_skips_applied_files_and_stops_at_until(tmp_path):
    files = listed("pubmed25n0001.xml.gz", "pubmed25n0002.xml.gz", "pubmed25n1275.xml.gz")
    state = SyncState(tmp_path / "state.json")
    state.record("pubmed25n0001.xml.gz", "a" * 32, Applied())
    todo, already = plan(files, state, None)
    assert [f.name for f in todo] == ["pubmed25n0002.xml.gz", "pubmed25n1275.xml.gz"]
    assert already == 1
    todo, _ = plan(files, state, "pubmed25n0002")  # the name without .xml.gz works too
    assert [f.name for f in todo] == ["pubmed25n0002.xml.gz"]
    assert until_index(files, "pubmed25n1275.xml.gz") == 3


def test_until_an_unknown_file_names_the_range_listed():
    files = listed("pubmed25n0001.xml.gz", "pubmed25n0002.xml.gz")
    with pytest.raises(ValueError, match=r"no such file.*pubmed25n0001.xml.gz … pubmed25n0002"):
        until_index(files, "pubmed24n0009")


class Served:
    """A mock mirror for httpx: path → bytes; records requests; can cut a transfer short once."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.requests: list[tuple[str, str | None]] = []
        self.cut_once: set[str] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        ranged = request.headers.get("Range")
        self.requests.append((path, ranged))
        if path not in self.files:
            return httpx.Response(404)
        body = self.files[path]
        if ranged:
            start = int(ranged.removeprefix("bytes=").rstrip("-"))
            if start >= len(body):
                return httpx.Response(416)
            return httpx.Response(206, stream=httpx.ByteStream(body[start:]))
        if path in self.cut_once:
            self.cut_once.discard(path)
            return httpx.Response(200, stream=_Broken(body[: len(body) // 2]))
        return httpx.Response(200, stream=httpx.ByteStream(body))


class _Broken(httpx.SyncByteStream):
    def __init__(self, head: bytes):
        self.head = head

    def __iter__(self):
        yield self.head
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


def mirror(served: Served, **kw) -> Mirror:
    kw = {"retries": 1, "per_second": 1000, "backoff_s": 0.0} | kw
    return Mirror(BASE, user_agent="quorum-test", transport=httpx.MockTransport(served), **kw)


def one_file(tmp_path: Path, name="pubmed25n0001.xml.gz"):
    data = pubmed_gz(tmp_path / "src.xml.gz", [article("1", "one"), article("2", "two")])
    files = {
        f"/pubmed/baseline/{name}": data,
        f"/pubmed/baseline/{name}.md5": md5_line(name, data).encode(),
    }
    return RemoteFile(name, "baseline", BASE + "baseline/" + name), data, Served(files)


def test_fetch_verifies_renames_and_never_fetches_a_verified_file_again(tmp_path):
    remote, data, served = one_file(tmp_path)
    folder = tmp_path / "files"
    folder.mkdir()
    md5, fetched = mirror(served).fetch(remote, folder, stop=threading.Event())
    assert fetched and md5 == hashlib.md5(data).hexdigest()
    assert (folder / remote.name).read_bytes() == data
    assert not (folder / (remote.name + ".part")).exists()
    served.requests.clear()
    assert mirror(served).fetch(remote, folder, stop=threading.Event()) == (md5, False)
    assert served.requests == []


def test_a_partial_file_resumes_with_a_range_request(tmp_path):
    remote, data, served = one_file(tmp_path)
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / (remote.name + ".part")).write_bytes(data[:40])  # what a killed run left
    _, fetched = mirror(served).fetch(remote, folder, stop=threading.Event())
    assert fetched and (folder / remote.name).read_bytes() == data
    assert (remote.url.removeprefix("https://mirror.test"), "bytes=40-") in served.requests


def test_a_transfer_cut_short_is_resumed_where_it_broke(tmp_path):
    remote, data, served = one_file(tmp_path)
    path = remote.url.removeprefix("https://mirror.test")
    served.cut_once.add(path)
    folder = tmp_path / "files"
    folder.mkdir()
    mirror(served).fetch(remote, folder, stop=threading.Event())
    assert (folder / remote.name).read_bytes() == data
    assert [r for p, r in served.requests if p == path] == [None, f"bytes={len(data) // 2}-"]


def test_a_whole_part_left_before_its_rename_is_used_not_fetched_again(tmp_path):
    remote, data, served = one_file(tmp_path)
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / (remote.name + ".part")).write_bytes(data)
    _, fetched = mirror(served).fetch(remote, folder, stop=threading.Event())
    assert fetched and (folder / remote.name).read_bytes() == data


def test_a_checksum_mismatch_names_the_file_and_discards_it(tmp_path):
    remote, data, served = one_file(tmp_path)
    served.files[remote.url.removeprefix("https://mirror.test")] = data[:-3] + b"xyz"
    folder = tmp_path / "files"
    folder.mkdir()
    with pytest.raises(ChecksumMismatch, match=r"pubmed25n0001.xml.gz: MD5 mismatch"):
        mirror(served).fetch(remote, folder, stop=threading.Event())
    assert list(folder.iterdir()) == []


def test_a_404_is_not_retried_and_names_the_url(tmp_path):
    remote, _, served = one_file(tmp_path)
    del served.files[remote.url.removeprefix("https://mirror.test")]
    with pytest.raises(NotFound, match=r"baseline/pubmed25n0001.xml.gz: not found \(404\)"):
        mirror(served).fetch(remote, tmp_path, stop=threading.Event())
    assert sum(p.endswith(".xml.gz") for p, _ in served.requests) == 1


def test_a_mirror_without_baseline_is_refused_as_wrong_input(tmp_path):
    with pytest.raises(BadMirror, match=r"baseline/ does not exist \(404\)"):
        mirror(Served({})).list_files()


def test_sync_applies_in_file_order_and_stops_at_the_first_bad_file(tmp_path):
    names = [f"pubmed25n000{i}.xml.gz" for i in range(1, 5)]
    files, remotes = {}, []
    for i, name in enumerate(names):
        data = pubmed_gz(tmp_path / name, [article(str(i + 1), f"title {i}")])
        files[f"/pubmed/baseline/{name}"] = data
        files[f"/pubmed/baseline/{name}.md5"] = md5_line(name, data).encode()
        remotes.append(RemoteFile(name, "baseline", BASE + "baseline/" + name))
    files[f"/pubmed/baseline/{names[2]}.md5"] = md5_line(names[2], b"other").encode()
    state = SyncState(tmp_path / "state.json")
    order: list[str] = []

    def apply(path: Path) -> Applied:
        order.append(path.name)
        assert path.exists()
        return Applied(records=sum(e == "article" for e, _ in iter_pubmed_articles(path)))

    summary = SyncSummary()
    with pytest.raises(ChecksumMismatch, match=names[2]):
        sync(mirror(Served(files)), remotes, tmp_path / "dl", state, apply, summary=summary)
    assert order == names[:2]
    assert list(SyncState(state.path).applied) == names[:2]
    assert summary.files_applied == 2 and summary.records == 2
    assert not (tmp_path / "dl" / names[0]).exists()  # applied files are not kept by default
    assert (
        not (tmp_path / "dl" / names[2]).exists()
        and not (tmp_path / "dl" / (names[2] + ".part")).exists()
    )


def test_progress_off_a_terminal_names_files_bytes_records_and_eta():
    from graphs.cli.pubmed import _progress_shown
    from infra.pubmed.sync import SyncProgress

    progress = SyncProgress(total=4)
    shown = _progress_shown(progress)
    assert "ETA" not in shown.describe()  # no file applied yet: no rate to go by
    progress.started -= 30
    progress.add(files_done=1, bytes=3 * 1024 * 1024, records=1200, deleted=3)
    line = shown.describe()
    assert line.startswith("pubmed sync: 1/4 files, 3.0 MB downloaded, 1,200 records, 3 deleted")
    assert "ETA 1 m 30 s" in line
