"""`quorum bioasq …`: Task B batches, submission checks and the official measures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli_common import CliError, err, settings_for

bioasq_app = typer.Typer(no_args_is_help=True, help="BioASQ Task B: run, validate, evaluate.")

PHASES = ("A", "A+", "B")


@bioasq_app.command("run")
def bioasq_run(
    input_path: Annotated[Path, typer.Option("--input", help="BioASQ test set (JSON).")],
    output: Annotated[Path, typer.Option("--output", help="Submission file to write.")],
    phase: Annotated[str, typer.Option("--phase", help="A, A+ or B.")] = "A+",
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Questions answered at once.")
    ] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
) -> None:
    """Answer a test set; killed and re-run, it resumes where its journal ends."""
    from graphs.bioasq_run import JournalMismatch, journal_path, run_batch
    from graphs.runtime import build_context

    if phase not in PHASES:
        raise CliError(f"unknown --phase {phase!r}; choose one of {', '.join(PHASES)}")
    if not input_path.is_file():
        raise CliError(f"{input_path}: no such file")
    if output.resolve() == input_path.resolve():
        raise CliError("--output must not be the --input file")
    settings = settings_for()
    try:
        report = asyncio.run(
            run_batch(
                build_context(settings),
                input_path,
                output,
                phase=phase,
                concurrency=concurrency,
                limit=limit,
            )
        )
    except JournalMismatch as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        err.print(
            f"interrupted; finished questions are in {journal_path(output)}: run the same "
            "command again to resume"
        )
        raise typer.Exit(130) from None
    err.print(
        f"{report.answered} answered, {report.resumed} from the journal, {len(report.failed)} "
        f"failed; {report.llm_calls} LLM calls, {report.tokens:,} tokens, {report.seconds:.1f} s "
        f"→ {output}"
    )
    for qid, why in report.failed.items():
        err.print(f"failed {qid}: {why}")
    if report.failed:
        raise typer.Exit(1)
