"""`quorum bioasq …`: Task B batches, submission checks and the official measures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from graphs.cli.common import (
    ApiKeyEnvOption,
    BackendOption,
    CliError,
    IndexOption,
    ModelOption,
    PresetOption,
    demo_notice,
    err,
    model_options,
    out,
    preset_options,
    role_notice,
    search_options,
    settings_for,
    write_json,
)
from infra.bioasq.types import ANSWERING_PHASES, RETRIEVING_PHASES, check_phase

bioasq_app = typer.Typer(no_args_is_help=True, help="BioASQ Task B: run, validate, evaluate.")


@bioasq_app.command("run")
def bioasq_run(
    input_path: Annotated[Path, typer.Option("--input", help="BioASQ test set (JSON).")],
    output: Annotated[Path, typer.Option("--output", help="Submission file to write.")],
    phase: Annotated[str, typer.Option("--phase", help="A, A+ or B.")] = "A+",
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Questions answered at once.")
    ] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    no_llm: Annotated[
        bool,
        typer.Option(
            "--no-llm",
            help="Phase A without any model: the question is the query (search.query_mode "
            "question), relaxed by rule.",
        ),
    ] = False,
    keep_insufficient: Annotated[
        bool,
        typer.Option(
            "--keep-insufficient",
            help="On a re-run, keep the journal's insufficient-evidence answers instead of "
            "trying those questions again.",
        ),
    ] = False,
    index_name: IndexOption = None,
    backend: BackendOption = None,
    model: ModelOption = None,
    api_key_env: ApiKeyEnvOption = None,
    preset: PresetOption = None,
) -> None:
    """Answer a test set; killed and re-run, it resumes where its journal ends."""
    from graphs.inputs import load_testset

    phase = _phase(phase)
    if no_llm and phase != "A":
        raise CliError(f"--no-llm runs phase A only (phase {phase} answers with a model)")
    if not input_path.is_file():
        raise CliError(f"{input_path}: no such file")
    if output.resolve() == input_path.resolve():
        raise CliError("--output must not be the --input file")
    from graphs.bioasq.journal import journal_path
    from infra.files import check_target
    from infra.search.backends import check_index_named

    check_target(output, what="--output", create_parent=True)  # before any model loads
    check_target(journal_path(output), what="the batch journal")
    overrides = preset_options(
        preset, search_options(index_name, backend) | model_options(model, api_key_env)
    )
    if no_llm:
        overrides.setdefault("search", {})["query_mode"] = "question"
    settings = settings_for(**overrides)
    check_index_named(settings)
    # Read once, and refused now if bad: before any model loads.
    questions = load_testset(input_path, phase=phase, limit=limit)

    from graphs.bioasq.journal import JournalMismatch
    from graphs.bioasq.run import BatchReport, run_batch
    from graphs.cli.interrupts import STOPPED_CODE, Interrupts
    from graphs.runtime import build_context
    from infra.models import ModelPool

    # With no model to call, the models' settings (endpoints, keys) are not checked either.
    models = ModelPool(settings) if no_llm else None
    if not no_llm:
        demo_notice(settings)  # before a batch that would otherwise be submitted unawares
        role_notice(settings)
    context = build_context(settings, models=models, questions_in_flight=concurrency)

    async def batch() -> BatchReport:
        with Interrupts("the questions in flight (each goes to the journal)") as interrupts:
            return await run_batch(
                context,
                input_path,
                output,
                phase=phase,
                concurrency=concurrency,
                limit=limit,
                keep_insufficient=keep_insufficient,
                stop=lambda: interrupts.stopping,
                questions=questions,
            )

    try:
        report = asyncio.run(batch())
    except JournalMismatch as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        err.print(
            f"interrupted; finished questions are in {journal_path(output)}: run the same "
            "command again to resume"
        )
        raise typer.Exit(130) from None
    err.print(
        f"{report.answered} answered, {report.resumed} from the journal, "
        f"{len(report.insufficient)} insufficient, {len(report.failed)} failed, "
        f"{len(report.guessed)} yes/no guessed (bioasq.unanswered_yesno); "
        f"{report.llm_calls} LLM calls, {report.tokens:,} tokens, {report.seconds:.1f} s "
        f"→ {output}"
    )
    for qid, why in report.insufficient.items():
        err.print(f"insufficient {qid}: {why}", markup=False)
    for qid, why in report.failed.items():
        err.print(f"failed {qid}: {why}", markup=False)
    if report.not_started:
        err.print(
            f"interrupted: {report.not_started} question(s) not started; finished ones are in "
            f"{journal_path(output)}: run the same command again to resume"
        )
        raise typer.Exit(STOPPED_CODE)
    if report.failed:
        raise typer.Exit(1)


@bioasq_app.command("validate")
def bioasq_validate(
    submission: Annotated[Path, typer.Argument(help="The submission JSON to check.")],
    input_path: Annotated[
        Path | None,
        typer.Option("--input", help="The test set: every question answered exactly once."),
    ] = None,
    phase: Annotated[
        str | None, typer.Option("--phase", help="A, A+ or B: what each answer must hold.")
    ] = None,
    check_texts: Annotated[
        bool,
        typer.Option(
            "--texts/--no-texts",
            help="Check snippet offsets and text against the configured index's stored text.",
        ),
    ] = True,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Fail on content warnings too (loops, debris, prose contradicting its exact "
            "answer), not only on what BioASQ would refuse.",
        ),
    ] = False,
    index_name: IndexOption = None,
    backend: BackendOption = None,
) -> None:
    """One line per problem; exit 1 on what BioASQ would refuse, content is a warning."""
    from infra.bioasq.validate import errors, validate_file

    phase = _phase(phase) if phase is not None else None
    if not submission.is_file():
        raise CliError(f"{submission}: no such file")
    if input_path is not None and not input_path.is_file():
        raise CliError(f"{input_path}: no such file")
    settings = settings_for(**search_options(index_name, backend))
    texts = _stored_texts(submission, settings) if check_texts else None
    problems = validate_file(submission, testset_path=input_path, phase=phase, texts=texts)
    for problem in problems:
        line = str(problem)
        line = line if line.startswith(str(submission)) else f"{submission}: {line}"
        typer.echo(line.replace(": ", ": warning: ", 1) if problem.warning else line)
    refused = len(errors(problems))
    warned = len(problems) - refused
    counted = f"{refused} problem(s), {warned} warning(s)"
    if refused or (strict and warned):
        why = " (--strict: warnings fail)" if strict and warned else ""
        err.print(f"{counted}{why}")
        raise typer.Exit(1)
    if warned:
        err.print(
            f"{submission}: valid, with {warned} content warning(s): BioASQ takes the file; "
            "--strict fails on them"
        )
        return
    err.print(f"{submission}: valid")


def _stored_texts(submission: Path, settings: Any) -> dict[str, dict[str, str]] | None:
    """Return title/abstract of the submission's snippet documents the index holds, if any."""
    import json

    from infra.bioasq.formats import pmid_of
    from infra.search.backends import index_exists, open_backend

    if not index_exists(settings):
        return None
    try:
        data = json.loads(submission.read_text(encoding="utf-8"))
        pmids = {
            pmid_of(s["document"])
            for q in data.get("questions", [])
            if isinstance(q, dict)
            for s in q.get("snippets") or []
            if isinstance(s, dict) and isinstance(s.get("document"), str)
        }
    except (ValueError, OSError, AttributeError, TypeError, KeyError):
        return None  # the validator reports what is wrong with the file itself
    backend = open_backend(settings, None)
    found = backend.fetch(sorted(pmids)) if pmids else []
    return {
        d["pmid"]: {"title": d.get("title") or "", "abstract": d.get("abstract") or ""}
        for d in found
    }


# Snippets: mean F-measure has been the official score since BioASQ9 (MAP since BioASQ8 for both).
PHASE_A_KEYS = (
    "documents_map",
    "documents_recall",
    "snippets_f1",
    "snippets_map",
    "snippets_recall",
)
PHASE_B_KEYS = (
    "yesno_accuracy",
    "yesno_macro_f1",
    "factoid_strict_accuracy",
    "factoid_lenient_accuracy",
    "factoid_mrr",
    "list_precision",
    "list_recall",
    "list_f1",
)


@bioasq_app.command("eval")
def bioasq_eval(
    gold: Annotated[Path, typer.Option("--gold", help="The golden file (BioASQ JSON).")],
    submission: Annotated[Path, typer.Option("--submission", help="The submission to score.")],
    phase: Annotated[
        str,
        typer.Option("--phase", help="A (documents, snippets), B (answers) or A+ (both)."),
    ] = "B",
    edition: Annotated[
        int, typer.Option(min=1, max=99, help="BioASQ edition whose measure definitions apply.")
    ] = 11,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """The official Task B measures (the organizers' EvaluatorTask1b definitions)."""
    import json
    import math

    from infra.bioasq.formats import FormatError
    from infra.bioasq.measures import evaluate_phase_a, evaluate_phase_b

    phase = _phase(phase)
    data = []
    for path in (gold, submission):
        if not path.is_file():
            raise CliError(f"{path}: no such file")
        try:
            data.append(json.loads(path.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno})") from None
    report: dict = {}
    if phase in RETRIEVING_PHASES:
        report |= evaluate_phase_a(data[0], data[1], edition=edition)
    if phase in ANSWERING_PHASES:  # A+ is scored as both: its documents and its answers
        report |= evaluate_phase_b(data[0], data[1], edition=edition)
    # JSON has no NaN: the evaluator's 0/0 cases (no question of a kind) become null.
    report = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in report.items()}
    _say_coverage(gold, submission, data[0], data[1])
    if as_json:
        write_json(report)
        return
    main = [k for k in (*PHASE_A_KEYS, *PHASE_B_KEYS) if k in report]
    for key in [*main, *(k for k in report if k not in main)]:
        value = report.get(key)
        from graphs.describe import measure_text

        out.print(f"{key:>28}  {measure_text(value)}")


def _say_coverage(gold_path: Path, submission_path: Path, gold: dict, submission: dict) -> None:
    """Refuse a submission that answers none of the gold questions; say so when it skips some.

    The official evaluator scores only the questions both files hold, so the wrong golden file
    scores as a table of zeros and nulls with nothing to say why.
    """
    wanted = {q.get("id") for q in gold.get("questions") or [] if isinstance(q, dict)}
    given = {q.get("id") for q in submission.get("questions") or [] if isinstance(q, dict)}
    scored = len(wanted & given)
    if wanted and not scored:
        raise CliError(
            f"{submission_path} answers none of the {len(wanted)} questions in {gold_path} "
            "(no id in common); score it against the golden file of the round it answers"
        )
    if scored < len(wanted) or scored < len(given):
        err.print(
            f"note: {scored} of the {len(wanted)} gold questions scored (the official evaluator "
            f"skips unanswered ones); submitted but not in the golden file: {len(given) - scored}"
        )


@bioasq_app.command("report")
def bioasq_report(
    run_dir: Annotated[Path, typer.Argument(help="A run's directory (or its submission file).")],
    gold: Annotated[Path, typer.Option("--gold", help="The golden file to score against.")],
    compare: Annotated[
        Path | None, typer.Option("--compare", help="Another run, compared question by question.")
    ] = None,
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Where to write (default: RUN_DIR/report).")
    ] = None,
) -> None:
    """Markdown and HTML report with PNG plots; McNemar and paired bootstrap against --compare."""
    import json

    from graphs.bioasq.report import load_run, score_run, write_report
    from infra.bioasq.formats import FormatError

    if not gold.is_file():
        raise CliError(f"{gold}: no such file")
    try:
        gold_data = json.loads(gold.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(f"{gold}: not JSON (line {exc.lineno}, column {exc.colno})") from None
    run = load_run(run_dir)
    score_run(run, gold_data)
    _say_coverage(gold, run_dir, gold_data, run.submission)
    other = None
    if compare is not None:
        other = load_run(compare)
        score_run(other, gold_data)
        _say_coverage(gold, compare, gold_data, other.submission)
    base = run_dir if run_dir.is_dir() else run_dir.parent
    target = output_dir or base / "report"
    if target.exists() and not target.is_dir():
        raise CliError(f"--output-dir {target} exists and is not a directory; name a directory")
    figures = write_report(run, gold_data, target, other)
    err.print(
        f"report for {figures['questions']} question(s), {figures['guessed']} yes/no guessed, "
        f"in {target}: {', '.join(figures['files'])}"
    )
    if figures["support"] is not None:
        from graphs.bioasq.report import support_text

        err.print(support_text(figures["support"]), markup=False)


def _phase(value: str) -> str:
    """Return --phase as PHASES spells it, or the one-line error for an unknown one."""
    try:
        return check_phase(value, name="--phase")
    except ValueError as exc:
        raise CliError(str(exc)) from None
