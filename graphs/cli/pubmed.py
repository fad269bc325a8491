"""`quorum pubmed sync`: PubMed's baseline and daily update files into an index, kept in step."""

from __future__ import annotations

import fcntl
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from tqdm import tqdm

from graphs.cli import common
from graphs.cli.common import CliError, err, fail, settings_for, write_json
from infra.heartbeat import Heartbeat

if TYPE_CHECKING:
    from infra.pubmed.sync import Applied, SyncProgress
    from infra.settings import Settings

NCBI = "https://ftp.ncbi.nlm.nih.gov/pubmed/"
_HELD: list = []
"""Lock files held open for the life of the process (the lock goes with the process)."""

pubmed_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="PubMed itself: sync the baseline and daily updates into an index.",
)
SYNC_HELP = (
    "Download PubMed's baseline and update files, verify each, index them in file order.\n\n"
    "A revised record replaces the old one and DeleteCitation removes it; a later run fetches "
    "and applies only the files not applied yet, and a killed run resumes (a partial download "
    "with an HTTP Range request). State and downloads live under QUORUM_HOME/pubmed/"
    "BACKEND-INDEX/. --json prints {files_downloaded, files_applied, records, deleted, "
    "skipped}: skipped counts records left out (no PMID, or over the size limit). A file whose "
    "MD5 does not match is named, nothing of it is indexed, exit 1."
)


@pubmed_app.callback()
def _group() -> None:
    """PubMed itself: sync the baseline and daily updates into an index."""


@pubmed_app.command("sync", help=SYNC_HELP)
def sync(
    mirror: Annotated[
        str,
        typer.Option("--mirror", help="Base URL holding baseline/ and updatefiles/ (NCBI's)."),
    ] = NCBI,
    name: common.WriterIndexOption = None,
    backend: common.WriterBackendOption = None,
    embeddings: Annotated[
        bool,
        typer.Option(
            "--embeddings/--no-embeddings",
            help="Store document vectors (without: searchable at once, `quorum embed` later).",
        ),
    ] = True,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="Stop after this file, e.g. pubmed25n1274 (the baseline a BioASQ year used).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one summary object on stdout.")
    ] = False,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the .xml.gz files once applied (deleted by default)."),
    ] = False,
    concurrency: Annotated[int, typer.Option(min=1, max=8, help="Files downloaded at once.")] = 3,
    rate: Annotated[
        float,
        typer.Option(min=0.1, max=10.0, help="Requests per second at most (NCBI asks for 3)."),
    ] = 3.0,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds without data before a request is retried.")
    ] = 60.0,
    retries: Annotated[
        int, typer.Option(min=0, max=10, help="Retries of a request that timed out or broke off.")
    ] = 2,
) -> None:
    """Download PubMed's baseline and update files, verify each, index them in file order."""
    from infra.pubmed.mirror import Mirror, SyncError, mirror_url
    from infra.pubmed.sync import SyncProgress, SyncState, SyncSummary, plan
    from infra.pubmed.sync import sync as run_sync
    from nodes.describing import plural

    common.checked_backend(backend)
    base = mirror_url(mirror)
    search = {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}
    settings = settings_for(search=search) if search else settings_for()
    where = f"{settings.search.backend}:{settings.search.index}"
    home = settings.home / "pubmed" / f"{settings.search.backend}-{settings.search.index}"
    home.mkdir(parents=True, exist_ok=True)
    _lock(home, where)
    state = SyncState(home / "state.json")
    client = Mirror(
        base,
        user_agent=_user_agent(settings),
        timeout_s=timeout,
        retries=retries,
        per_second=rate,
    )
    summary = SyncSummary()
    progress = SyncProgress()
    applier = _Applier(settings, embeddings, progress)
    failure: tuple[str, int] | None = None
    try:
        files = client.list_files()
        if state.applied and not _index_exists(settings):
            err.print(
                f"note: index {where} does not exist; applying the {len(state.applied):,} files "
                "recorded for it again",
                markup=False,
            )
            state.reset()
        todo, summary.already = plan(files, state, until)
        if todo:
            err.print(
                f"pubmed sync: {plural(len(todo), 'file')} to fetch and apply from {base} "
                f"into {where}",
                markup=False,
            )
        with _progress_shown(progress):
            run_sync(
                client,
                todo,
                home / "files",
                state,
                applier,
                summary=summary,
                concurrency=concurrency,
                keep=keep,
                progress=progress,
            )
    except SyncError as exc:
        failure = str(exc), 1
    except KeyboardInterrupt:
        failure = "interrupted; run the same command again to resume", 130
    finally:
        # Before any exit: fail() leaves at once, and Elasticsearch's writer puts the index's
        # refresh and replicas back when it closes.
        applier.close()
        client.close()
    _report(summary, as_json, where)
    if failure is not None:
        fail(*failure)
    if embeddings and summary.files_applied:
        from graphs.cli.index import refresh_dense_stage

        refresh_dense_stage(settings)


def _report(summary, as_json: bool, where: str) -> None:
    from nodes.describing import plural

    err.print(
        f"pubmed sync: applied {plural(summary.files_applied, 'file')} "
        f"({summary.files_downloaded:,} downloaded), {plural(summary.records, 'record')}, "
        f"{summary.deleted:,} deleted, {summary.skipped:,} left out; "
        f"{plural(summary.already, 'file')} applied before; into {where}",
        markup=False,
    )
    if as_json:
        write_json(summary.summary())


class _Applier:
    """Apply one verified file to the index; the writer (and model) opens at the first file."""

    def __init__(self, settings: Settings, embeddings: bool, progress: SyncProgress):
        self.settings = settings
        self.embeddings = embeddings
        self.progress = progress
        self.writer = self.embedder = self.journal = None
        self.existed = False
        self.applied_any = False

    def __call__(self, path: Path) -> Applied:
        from infra.ingest.pipeline import ingest
        from infra.ingest.sources import SourceError
        from infra.pubmed.mirror import SyncError
        from infra.pubmed.sync import Applied

        if self.writer is None:
            self._open()
        try:
            report = ingest(
                [path],
                self.writer,
                self.embedder,
                self.journal,
                on_progress=lambda docs, gone: self.progress.add(records=docs, deleted=gone),
                on_reject=lambda why: err.print(f"skipped {why}", markup=False),
            )
        except SourceError as exc:  # verified against its MD5, yet unreadable: the mirror's fault
            raise SyncError(
                f"{exc} (the file matches its published MD5: the mirror serves it so); the files "
                "before it stay applied"
            ) from None
        self.applied_any = True
        return Applied(report.upserted, report.deleted, len(report.rejected))

    def _open(self) -> None:
        from infra.embeddings import HuggingFaceEmbedder
        from infra.ingest.pipeline import Journal
        from infra.search.backends import index_exists, journal_path, open_writer

        self.embedder = HuggingFaceEmbedder(self.settings.embeddings) if self.embeddings else None
        self.existed = index_exists(self.settings)
        self.writer = open_writer(self.settings, self.embedder)
        self.journal = Journal(journal_path(self.settings, self.writer))

    def close(self) -> None:
        if self.writer is None:
            return
        from infra.search.backends import drop_index

        self.writer.close()
        if not self.applied_any and not self.existed and not any(self.journal.done.values()):
            drop_index(self.settings)  # leave no empty index behind for `ask` to search


def _index_exists(settings: Settings) -> bool:
    from infra.search.backends import index_exists

    return index_exists(settings)


def _lock(home: Path, where: str) -> None:
    """Hold an exclusive lock on the index's sync folder until the process ends."""
    handle = open(home / "lock", "w")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise CliError(
            f"another `quorum pubmed sync` into {where} is running; wait for it to finish"
        ) from None
    _HELD.append(handle)


def _user_agent(settings: Settings) -> str:
    from importlib.metadata import version

    email = settings.fallback.email
    if not email:
        err.print(
            "note: no contact e-mail is set; NCBI asks tools to give one: set "
            "QUORUM_FALLBACK__EMAIL",
            markup=False,
        )
    contact = f"; mailto:{email}" if email else ""
    return f"quorum/{version('quorum')} (PubMed sync{contact})"


class _progress_shown:
    """A bar of files (bytes, records, ETA) on a terminal; heartbeat lines elsewhere."""

    def __init__(self, progress: SyncProgress):
        self.progress = progress
        self.bar = tqdm(
            total=0,
            desc="pubmed sync",
            unit=" files",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=None,
            mininterval=0.5,
        )
        self.beat = Heartbeat(self.describe)

    def describe(self) -> str:
        p = self.progress
        eta = p.eta_s()
        left = f", ETA {_duration(eta)}" if eta is not None else ""
        return (
            f"pubmed sync: {p.files_done:,}/{p.total:,} files, {_size(p.bytes)} downloaded, "
            f"{p.records:,} records, {p.deleted:,} deleted{left}"
        )

    def changed(self, p: SyncProgress) -> None:
        self.bar.total = p.total
        self.bar.set_postfix_str(
            f"{_size(p.bytes)}, {p.records:,} records, {p.deleted:,} deleted", refresh=False
        )
        self.bar.update(p.files_done - self.bar.n)

    def __enter__(self) -> _progress_shown:
        self.progress.changed = self.changed
        self.beat.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.beat.__exit__(*exc)
        self.bar.close()


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} m" if hours else f"{minutes} m {secs} s"
