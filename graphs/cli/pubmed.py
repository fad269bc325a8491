"""`quorum pubmed sync`: PubMed's baseline and daily update files into an index, kept in step.

The work is infra/ingest/sync_job.py's (lock, state, mirror, and the ingest session each file
goes through); here the arguments, the notes and progress shown, the summary and exit codes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer
from tqdm import tqdm

from graphs.cli import common
from graphs.cli.common import err, fail, settings_for, write_json
from infra.heartbeat import Heartbeat

if TYPE_CHECKING:
    from infra.pubmed.sync import SyncProgress, SyncSummary

NCBI = "https://ftp.ncbi.nlm.nih.gov/pubmed/"

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
    from infra.ingest.sync_job import SyncJob
    from infra.pubmed.mirror import SyncError, mirror_url
    from nodes.describing import plural

    common.checked_backend(backend)
    base = mirror_url(mirror)
    search = {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}
    settings = settings_for(search=search) if search else settings_for()
    failure: tuple[str, int] | None = None
    # Closed before any exit: fail() leaves at once, and Elasticsearch's writer puts the index's
    # refresh and replicas back when it closes.
    with SyncJob(
        settings,
        base,
        embeddings=embeddings,
        timeout_s=timeout,
        retries=retries,
        per_second=rate,
        on_note=_say,
        on_reject=lambda why: _say(f"skipped {why}"),
    ) as job:
        try:
            todo = job.plan(until)
            if todo:
                _say(
                    f"pubmed sync: {plural(len(todo), 'file')} to fetch and apply from {base} "
                    f"into {job.where}"
                )
            with _progress_shown(job.progress):
                job.run(todo, concurrency=concurrency, keep=keep)
        except SyncError as exc:
            failure = str(exc), 1
        except KeyboardInterrupt:
            failure = "interrupted; run the same command again to resume", 130
    _report(job.summary, as_json, job.where)
    if failure is not None:
        fail(*failure)
    if embeddings and job.summary.files_applied:
        from graphs.cli.index import refresh_dense_stage

        refresh_dense_stage(settings)


def _say(line: str) -> None:
    err.print(line, markup=False)


def _report(summary: SyncSummary, as_json: bool, where: str) -> None:
    from nodes.describing import plural

    _say(
        f"pubmed sync: applied {plural(summary.files_applied, 'file')} "
        f"({summary.files_downloaded:,} downloaded), {plural(summary.records, 'record')}, "
        f"{summary.deleted:,} deleted, {summary.skipped:,} left out; "
        f"{plural(summary.already, 'file')} applied before; into {where}"
    )
    if as_json:
        write_json(summary.summary())


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
