"""PubMed's public file layout over HTTP(S): list baseline/ and updatefiles/, fetch and verify.

NCBI publishes the annual baseline and the daily update files at
https://ftp.ncbi.nlm.nih.gov/pubmed/{baseline,updatefiles}/, each `pubmedYYnNNNN.xml.gz` beside a
`.md5` holding `MD5(pubmedYYnNNNN.xml.gz)= hex`. A file is written to `NAME.part`, resumed with
an HTTP Range request after a kill or a dropped connection, and renamed to `NAME` only once its
MD5 matches; its checksum is kept in `NAME.md5`, so a verified file is never fetched again.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx

from infra.errors import UserError

DEFAULT_MIRROR = "https://ftp.ncbi.nlm.nih.gov/pubmed/"
SECTIONS = ("baseline", "updatefiles")
"""The mirror's two directories, in the order their files apply."""
FILE_NAME = re.compile(r"^pubmed(\d+)n(\d{4,})\.xml\.gz$")
_HREF = re.compile(r"""href\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_MD5_LINE = re.compile(r"^\s*MD5\s*\((?P<name>[^)]+)\)\s*=\s*(?P<hex>[0-9a-fA-F]{32})\s*$")
_MD5SUM_LINE = re.compile(r"^\s*(?P<hex>[0-9a-fA-F]{32})\s+\*?(?P<name>\S+)\s*$")


class SyncError(Exception):
    """A download or verification that failed: one line naming the file or URL (exit 1)."""


class NotFound(SyncError):
    """The mirror answered 404 for a file its listing named."""


class ChecksumMismatch(SyncError):
    """A downloaded file whose MD5 is not the one published beside it."""


class Stopped(Exception):
    """The sync stopped (another file failed, or Ctrl-C) while this file was transferring."""


class BadMirror(UserError):
    """A --mirror that cannot be a PubMed mirror: the wrong scheme, or no baseline/ there."""


@dataclass(frozen=True)
class RemoteFile:
    """One data file on the mirror."""

    name: str
    section: str
    url: str

    @property
    def md5_url(self) -> str:
        """Return the URL of the file's published checksum."""
        return self.url + ".md5"

    @property
    def order(self) -> tuple[int, int, int]:
        """Sort key: baseline before updates, then by release year and file number."""
        match = FILE_NAME.match(self.name)
        assert match is not None
        return SECTIONS.index(self.section), int(match.group(1)), int(match.group(2))


def mirror_url(url: str) -> str:
    """Return the mirror's base URL with a trailing slash, or refuse a URL that is not HTTP(S)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadMirror(
            f"--mirror {url!r} is not an http(s) URL; give the directory holding baseline/ and "
            f"updatefiles/, e.g. {DEFAULT_MIRROR}"
        )
    return url.strip().rstrip("/") + "/"


def parse_listing(html: str, directory_url: str, section: str) -> list[RemoteFile]:
    """Return the data files a directory listing links to, in file order (.md5 links left out)."""
    found: dict[str, RemoteFile] = {}
    for href in _HREF.findall(html):
        name = href.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if FILE_NAME.match(name):
            found[name] = RemoteFile(name, section, urljoin(directory_url, name))
    return sorted(found.values(), key=lambda f: f.order)


def parse_md5(text: str, name: str) -> str:
    """Return the hex digest a `.md5` file publishes for `name` (OpenSSL or md5sum style)."""
    for line in text.splitlines():
        match = _MD5_LINE.match(line) or _MD5SUM_LINE.match(line)
        if match and match.group("name").strip() == name:
            return match.group("hex").lower()
    raise SyncError(f"{name}.md5 does not hold a checksum for {name} (read: {text[:80]!r})")


def file_md5(path: Path) -> str:
    """Return the MD5 hex digest of a file on disk."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a fsynced temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RateLimit:
    """At most `per_second` request starts per second, across threads."""

    def __init__(self, per_second: float):
        self._interval = 1.0 / per_second
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        """Block until this request may start."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self._interval
        if start > now:
            time.sleep(start - now)


class Mirror:
    """A PubMed mirror: listings, checksums and data files, politely and with retries."""

    def __init__(
        self,
        base_url: str,
        *,
        user_agent: str,
        timeout_s: float = 60.0,
        retries: int = 2,
        per_second: float = 3.0,
        backoff_s: float = 1.0,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = mirror_url(base_url)
        self.retries = retries
        self.timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._limit = RateLimit(per_second)
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": user_agent},
            transport=transport,
            follow_redirects=True,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def list_files(self) -> list[RemoteFile]:
        """Return every data file of baseline/ then updatefiles/, each in file order.

        A mirror without updatefiles/ (a copy of one year's baseline) lists the baseline alone.
        """
        files: list[RemoteFile] = []
        for section in SECTIONS:
            url = urljoin(self.base_url, section + "/")
            try:
                files += parse_listing(self._text(url), url, section)
            except NotFound:
                if section == "baseline":
                    raise BadMirror(
                        f"{url} does not exist (404); --mirror must be the directory holding "
                        f"baseline/ and updatefiles/, e.g. {DEFAULT_MIRROR}"
                    ) from None
        return files

    def fetch(
        self,
        remote: RemoteFile,
        folder: Path,
        *,
        stop: threading.Event,
        on_bytes: Callable[[int], None] = lambda n: None,
    ) -> tuple[str, bool]:
        """Return (MD5, whether it was downloaded now) once `folder/NAME` holds the verified file.

        A file verified by an earlier run is used as it is; a `NAME.part` left by a killed run is
        resumed with a Range request. A checksum mismatch deletes the partial file (the next run
        fetches it anew) and raises ChecksumMismatch.
        """
        final, sidecar = folder / remote.name, folder / (remote.name + ".md5")
        if final.exists() and sidecar.exists():
            return sidecar.read_text().strip(), False
        expected = parse_md5(self._text(remote.md5_url), remote.name)
        part = folder / (remote.name + ".part")
        self._retrying(
            remote.url, lambda: self._transfer(remote.url, part, expected, stop, on_bytes)
        )
        got = file_md5(part)
        if got != expected:
            part.unlink(missing_ok=True)
            raise ChecksumMismatch(
                f"{remote.name}: MD5 mismatch (published {expected}, downloaded {got}); the file "
                "was discarded and nothing of it indexed"
            )
        write_atomic(sidecar, expected + "\n")
        os.replace(part, final)
        return expected, True

    def _transfer(
        self,
        url: str,
        part: Path,
        expected: str,
        stop: threading.Event,
        on_bytes: Callable[[int], None],
    ) -> None:
        offset = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        self._limit.wait()
        with self._http.stream("GET", url, headers=headers) as response:
            if response.status_code == 416 and offset:
                # The part may be whole already (killed between its last byte and the rename).
                if file_md5(part) == expected:
                    return
                part.unlink()
                raise httpx.TransportError(f"{part.name} could not be resumed; starting over")
            _check(response, url)
            resumed = response.status_code == 206
            with open(part, "ab" if resumed else "wb") as fh:
                for chunk in response.iter_raw():  # the file's bytes as they arrive
                    if stop.is_set():
                        raise Stopped(url)
                    fh.write(chunk)
                    on_bytes(len(chunk))
                fh.flush()
                os.fsync(fh.fileno())

    def _text(self, url: str) -> str:
        def get() -> str:
            self._limit.wait()
            response = self._http.get(url)
            _check(response, url)
            return response.text

        return self._retrying(url, get)

    def _retrying(self, url: str, call: Callable[[], object]):
        """Run `call`, retrying timeouts, dropped connections and 5xx with growing pauses."""
        for attempt in range(self.retries + 1):
            try:
                return call()
            except (httpx.TransportError, _ServerError) as exc:
                if attempt == self.retries:
                    raise SyncError(_failure(url, exc, self)) from None
                time.sleep(min(self._backoff_s * 2**attempt, 30.0))
        raise AssertionError("unreachable")


class _ServerError(Exception):
    """A 5xx or other unexpected answer: worth another try."""


def _check(response: httpx.Response, url: str) -> None:
    if response.status_code == 404:
        raise NotFound(f"{url}: not found (404) on the mirror; nothing of it was indexed")
    if response.status_code not in (200, 206):
        raise _ServerError(f"HTTP {response.status_code}")


def _failure(url: str, exc: Exception, mirror: Mirror) -> str:
    tries = f"{mirror.retries + 1} tries"
    if isinstance(exc, httpx.TimeoutException):
        why = f"the mirror stopped answering (no data for {mirror.timeout_s:g} s, {tries})"
    elif isinstance(exc, httpx.ConnectError):
        why = f"cannot connect ({exc}; {tries}); check --mirror and the network"
    elif isinstance(exc, httpx.RemoteProtocolError):
        why = f"the transfer broke off ({exc}; {tries})"
    else:
        why = f"{exc or type(exc).__name__} ({tries})"
    return f"{url}: {why}; run the same command again to resume"
