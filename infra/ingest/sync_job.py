"""`quorum pubmed sync`'s job: the index's sync folder (locked), its state, mirror, ingest session.

The folder (QUORUM_HOME/pubmed/BACKEND-INDEX/) holds the state file and the downloads; its lock
keeps a second sync into the same index out for the life of the process. Files reach the index
through `Applier`, `sync`'s `apply`: the ingest session's `index`, one file at a time, the
writer (and model) opened at the first file, so a run with nothing new loads nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from infra.errors import UserError
from infra.files import hold_lock
from infra.ingest.session import IngestSession
from infra.ingest.sources import SourceError
from infra.pubmed.mirror import Mirror, RemoteFile, SyncError
from infra.pubmed.sync import Applied, SyncProgress, SyncState, SyncSummary, plan, sync
from infra.search.backends import index_exists
from infra.settings import Settings


class SyncRunning(UserError):
    """Another `quorum pubmed sync` holds the same index's folder."""


class Applier:
    """Apply one verified file to the index through the ingest session (`sync`'s `apply`)."""

    def __init__(
        self, session: IngestSession, progress: SyncProgress, on_reject: Callable[[str], None]
    ):
        self.session = session
        self.progress = progress
        self.on_reject = on_reject

    def __call__(self, path: Path) -> Applied:
        """Index `path`; a verified file that does not read is the mirror's fault: SyncError."""
        self.session.open()
        try:
            report = self.session.index(
                [path],
                on_progress=lambda docs, gone: self.progress.add(records=docs, deleted=gone),
                on_reject=self.on_reject,
            )
        except SourceError as exc:  # verified against its MD5, yet unreadable
            raise SyncError(
                f"{exc} (the file matches its published MD5: the mirror serves it so); the files "
                "before it stay applied"
            ) from None
        return Applied(report.upserted, report.deleted, len(report.rejected))


class SyncJob:
    """One sync into the configured index: a context manager that closes writer and mirror."""

    def __init__(
        self,
        settings: Settings,
        base: str,
        *,
        embeddings: bool,
        timeout_s: float,
        retries: int,
        per_second: float,
        on_note: Callable[[str], None],
        on_reject: Callable[[str], None],
    ):
        search = settings.search
        self.settings = settings
        self.on_note = on_note
        self.where = f"{search.backend}:{search.index}"
        self.home = settings.home / "pubmed" / f"{search.backend}-{search.index}"
        self.home.mkdir(parents=True, exist_ok=True)
        if not hold_lock(self.home / "lock"):
            raise SyncRunning(
                f"another `quorum pubmed sync` into {self.where} is running; wait for it to finish"
            )
        self.state = SyncState(self.home / "state.json")
        self.mirror = Mirror(
            base,
            user_agent=self.user_agent(),
            timeout_s=timeout_s,
            retries=retries,
            per_second=per_second,
        )
        self.summary = SyncSummary()
        self.progress = SyncProgress()
        self.session = IngestSession(settings, embeddings=embeddings)
        self.applier = Applier(self.session, self.progress, on_reject)

    def __enter__(self) -> SyncJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def user_agent(self) -> str:
        """Return the User-Agent NCBI is sent: with the contact e-mail, noted when there is none."""
        email = self.settings.fallback.email
        if not email:
            self.on_note(
                "note: no contact e-mail is set; NCBI asks tools to give one: set "
                "QUORUM_FALLBACK__EMAIL"
            )
        contact = f"; mailto:{email}" if email else ""
        return f"quorum/{version('quorum')} (PubMed sync{contact})"

    def plan(self, until: str | None) -> list[RemoteFile]:
        """Return the files to fetch and apply, in order; count those applied before."""
        files = self.mirror.list_files()
        if self.state.applied and not index_exists(self.settings):
            self.on_note(
                f"note: index {self.where} does not exist; applying the "
                f"{len(self.state.applied):,} files recorded for it again"
            )
            self.state.reset()
        todo, self.summary.already = plan(files, self.state, until)
        return todo

    def run(self, todo: list[RemoteFile], *, concurrency: int, keep: bool) -> SyncSummary:
        """Fetch and apply `todo` in order (`sync`); the summary counts what was done so far."""
        return sync(
            self.mirror,
            todo,
            self.home / "files",
            self.state,
            self.applier,
            summary=self.summary,
            concurrency=concurrency,
            keep=keep,
            progress=self.progress,
        )

    def close(self) -> None:
        """Close the ingest session, then the mirror's connections."""
        try:
            self.session.close()
        finally:
            self.mirror.close()
