"""The `quorum` command line."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.exceptions import TyperException

from graphs.cli_bioasq import bioasq_app
from graphs.cli_common import CliError, err, out, settings_for, write_json
from graphs.cli_measure import bench_app, eval_app
from graphs.cli_trace import trace_app

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Answer biomedical questions from PubMed, BioASQ-style, with every step traceable.",
)
app.add_typer(trace_app, name="trace")
app.add_typer(eval_app, name="eval")
app.add_typer(bench_app, name="bench")
app.add_typer(bioasq_app, name="bioasq")

QUESTION_TYPES = ("yesno", "factoid", "list", "summary")


def _demo_notice(settings: Any) -> None:
    roles = ("query", "refine", "organize", "ensemble", "synthesis")
    if any(
        spec.provider == "local" and spec.path is None
        for r in roles
        for spec in settings.models.for_role(r)
    ):
        err.print(
            "[dim]note: answering with the built-in SmolLM2-135M demo model, which proves the "
            "pipeline's "
            "wiring, not answer quality. Point quorum at a real model: see README, 'Models'.[/dim]"
        )


PROGRESS = {
    "generate_query": "writing the search query",
    "search": "searching",
    "refine_query": "relaxing the query",
    "rerank": "reranking",
    "organize": "organizing contexts",
    "ensemble": "ensemble answering",
    "synthesize": "synthesizing",
    "fallback_search": "searching PubMed",
    "finalize": "finalizing",
}
NEXT = {
    "generate_query": "search",
    "search": "rerank",
    "refine_query": "search",
    "rerank": "organize",
    "organize": "ensemble",
    "ensemble": "synthesize",
    "synthesize": "finalize",
    "fallback_search": "rerank",
}


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    qtype: Annotated[
        str | None,
        typer.Option("--type", help="yesno, factoid, list or summary (detected when omitted)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Answer a question from the configured corpus."""
    from graphs.inputs import check_question

    question = check_question(question)
    if qtype is not None and qtype not in QUESTION_TYPES:
        raise CliError(f"unknown --type {qtype!r}; choose one of {', '.join(QUESTION_TYPES)}")
    settings = settings_for()
    from graphs.runtime import build_context, run_question  # models and index: after the checks

    _demo_notice(settings)
    with err.status("loading models and index…") as status:
        context = build_context(settings)

        def progress(node: str, update: dict[str, Any]) -> None:
            detail = ""
            if node == "search" and "hits" in update:
                detail = f" ({update['hits']:,} hits)"
            err.print(f"[dim]✓ {PROGRESS.get(node, node)}{detail}[/dim]")
            status.update(f"{PROGRESS.get(NEXT.get(node, ''), 'working')}…")

        status.update("writing the search query…")
        _, result = asyncio.run(
            run_question(settings, question, qtype, context=context, on_event=progress)
        )
    if as_json:
        keys = (
            "question",
            "type",
            "exact_answer",
            "ideal_answer",
            "confidence",
            "documents",
            "snippets",
            "thread_id",
        )
        write_json({k: result.get(k) for k in keys})
        return
    _print_answer(result)


def _print_answer(result: dict[str, Any]) -> None:
    exact = result.get("exact_answer")
    if isinstance(exact, list):
        exact = "; ".join(item[0] for item in exact if item) or "(none)"
    out.print(
        f"[bold]Answer[/bold] ({result['type']}): {exact if exact is not None else '(summary)'}"
    )
    out.print(f"[bold]Confidence[/bold]: {result.get('confidence', 0):.2f}")
    if result.get("ideal_answer"):
        out.print(result["ideal_answer"])
    titles = result.get("titles", {})
    if result.get("documents"):
        out.print("[bold]Documents[/bold] (best first):")
        for pmid in result["documents"][:5]:
            out.print(f"  [{pmid}] {titles.get(pmid, '')}")
    out.print(
        f"[dim]thread {result['thread_id']} — every step: "
        f"quorum trace show {result['thread_id']}[/dim]"
    )


@app.command()
def index(
    sources: Annotated[list[Path], typer.Argument(help=".jsonl(.gz) or PubMed .xml(.gz) files.")],
    backend: Annotated[
        str | None, typer.Option("--backend", help="embedded or elasticsearch (default: settings).")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--index", help="Index name (default: settings).")
    ] = None,
    embeddings: Annotated[
        bool,
        typer.Option("--embeddings/--no-embeddings", help="Store document vectors for reranking."),
    ] = True,
    batch_size: Annotated[int, typer.Option(min=1, max=10_000, help="Documents per batch.")] = 256,
    commit_every: Annotated[
        int,
        typer.Option(min=1, help="Documents between commits (a killed run resumes from the last)."),
    ] = 4096,
) -> None:
    """Index corpus files; re-indexing replaces by PMID, and an interrupted run resumes."""
    from graphs.indexing import run_index

    if backend is not None and backend not in ("embedded", "elasticsearch"):
        raise CliError(f"unknown --backend {backend!r}; choose embedded or elasticsearch")
    search = {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}
    settings = settings_for(search=search) if search else settings_for()
    try:
        report = run_index(
            settings,
            sources,
            embeddings=embeddings,
            batch_size=batch_size,
            commit_every=commit_every,
        )
    except KeyboardInterrupt:
        _fail("interrupted; run the same command again to resume from the last commit", 130)
    err.print(
        f"indexed {report.upserted:,} documents, deleted {report.deleted:,}, resumed past "
        f"{report.skipped:,} into {settings.search.backend}:{settings.search.index} "
        f"({report.docs_per_s:,.0f} docs/s)"
    )


@app.command()
def chat(
    index_name: Annotated[
        str | None, typer.Option("--index", help="Index to chat over (default: settings).")
    ] = None,
) -> None:
    """Chat with the corpus: follow-ups, /open PMID, /trace, /new, /quit."""
    from rich.console import Console

    settings = settings_for(search={"index": index_name}) if index_name else settings_for()
    _demo_notice(settings)
    from graphs.chat import run_chat
    from graphs.runtime import build_context

    with err.status("loading models and index…"):
        context = build_context(settings)
    console = Console()
    run_chat(settings, context, console, lambda: console.input("[bold]you>[/bold] "))


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback unless --allow-remote).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a non-loopback --host: whoever reaches it can ask and read every trace.",
        ),
    ] = False,
) -> None:
    """Serve a local web page: chat with the corpus and step through each turn's nodes."""
    import socket

    import uvicorn

    from graphs.runtime import build_context
    from graphs.server import LOOPBACK_NAMES, create_app, is_loopback

    remote = not is_loopback(host)
    if remote and not allow_remote:
        raise CliError(
            f"--host {host} is reachable from other machines and the page has no login; "
            "add --allow-remote to serve it anyway"
        )
    settings = settings_for()
    _demo_notice(settings)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    with err.status("loading models and index…"):
        context = build_context(settings)
    if remote:
        err.print(
            f"[yellow]warning: serving on {host}, not loopback: anyone who can reach this port "
            "can ask questions and read every trace; there is no login.[/yellow]"
        )
    shown = f"[{host}]" if ":" in host else host
    err.print(f"quorum: serving on http://{shown}:{port}/ (Ctrl+C to stop)")
    hosts = ["*"] if remote else [host, *LOOPBACK_NAMES]
    config = uvicorn.Config(
        create_app(settings, context, allowed_hosts=hosts),
        log_level="warning",
        timeout_graceful_shutdown=3,
    )
    uvicorn.Server(config).run(sockets=[listener])


def main() -> None:
    """Run the CLI: user errors are one line, exit 2; tracebacks only with QUORUM_DEBUG set."""
    from infra.errors import UserError

    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        code = app(standalone_mode=False)
        _exit(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        _exit(exc.exit_code)
    except typer.Abort:
        _fail("aborted", 130)
    except TyperException as exc:  # usage errors from typer's bundled click
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()
            _exit(2)
        _fail(exc.format_message(), getattr(exc, "exit_code", 2))
    except (CliError, UserError) as exc:
        _fail(str(exc), 2)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as exc:
        if os.environ.get("QUORUM_DEBUG"):
            raise
        _fail(
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            "(set QUORUM_DEBUG=1 for details)",
            1,
        )


def _fail(message: str, code: int) -> None:
    line = " ".join(message.split())  # one line, whatever the message held
    sys.stderr.write(f"quorum: error: {line}\n")
    _exit(code)


def _exit(code: int) -> None:
    # NOTE: tearing down torch and sentence-transformers at interpreter exit takes ~2 s on
    # 2 cores; everything quorum writes is closed by now, so leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
