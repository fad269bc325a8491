"""`quorum bench …`: speed and memory — help, first-hour, embed, train, pipeline, batch, faults.

The search engines' benches (retrieval, scale, dense) are lab/cli/bench_search.py, which adds
them to this group when graphs/cli assembles the command line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli.common import (
    CliError,
    backend_names,
    err,
    out,
    print_report,
    settings_for,
    write_json,
)
from infra.training.options import TrainOptions

BACKENDS = backend_names()
TRAINING = TrainOptions()
"""A training run's defaults, stated once in infra/training/options.py."""

bench_app = typer.Typer(no_args_is_help=True, help="Speed and memory benchmarks.")


@bench_app.command("help")
def bench_help_cmd(
    repeat: Annotated[int, typer.Option(min=1, help="Runs of each help (the median counts).")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """`quorum --help` and every command's --help, each in a fresh process, against 1 s."""
    from graphs.cli import COMMANDS, load_command
    from lab.bench.help import bench_help

    report = bench_help({name: load_command(name) for name in COMMANDS}, repeat)
    if as_json:
        write_json(report)
        return
    for row in report["rows"]:
        out.print(f"{row['median_s']:>6.2f} s  quorum {row['args']}")
    out.print(
        f"slowest {report['slowest']['median_s']:.2f} s (quorum {report['slowest']['args']}); "
        f"target ≤ {report['target_s']:.0f} s: {'met' if report['met'] else 'NOT met'}"
    )


@bench_app.command("first-hour")
def bench_first_hour_cmd(
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help="Comma-separated cases to run (default: all): cold_ask, warm_ask, "
            "a_plus_question, trace_list, missing_index.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON report to this file.")
    ] = None,
) -> None:
    """A new user's first five commands, each a fresh `quorum` on the demo, against targets.

    ask from an empty data directory and again, one A+ question, trace list, a missing index.
    """
    from infra.files import check_target, write_json_atomic
    from lab.bench.first_hour import CASES, bench_first_hour

    chosen = [c.strip() for c in only.split(",") if c.strip()] if only else list(CASES)
    if unknown := [c for c in chosen if c not in CASES]:
        raise CliError(f"--only {unknown[0]!r}: no such case; choose from {', '.join(CASES)}")
    if not chosen:
        raise CliError(f"--only names no case; choose from {', '.join(CASES)}")
    if out_file is not None:
        check_target(out_file, what="--out", create_parent=True)  # before minutes of runs
    report = bench_first_hour(chosen, say=lambda line: err.print(line, markup=False))
    if out_file is not None:
        write_json_atomic(out_file, report, what="--out")
    if as_json:
        write_json(report)
        return
    for row in report["cases"]:
        verdict = "met" if row["passed"] else f"MISSED: {row['why']}"
        out.print(
            f"{row['seconds']:>7.2f} s  {row['help_ratio']:>5g}× --help  ≤ {row['target_s']:>4} s"
            f"  {verdict:<5}  {row['command']}",
            markup=False,
        )
    load = ", ".join(f"{x:.2f}" for x in report["loadavg"])
    compiled = report["bytecode"]["installed_compiled"]
    out.print(f"installed packages {'compiled to bytecode' if compiled else 'WITHOUT bytecode'}")
    out.print(
        f"quorum --help took {report['help_s']:.2f} s; "
        f"load average at the start {load} on {report['cpus']} CPUs; "
        f"{'every target met' if report['passed'] else 'a target NOT met'}"
    )


@bench_app.command("embed")
def bench_embed_cmd(
    docs: Annotated[int, typer.Option("--docs", min=1, help="Texts embedded per run.")] = 100_000,
    words: Annotated[
        int,
        typer.Option("--words", min=0, help="Join documents to this many words (0: as they are)."),
    ] = 250,
    workers: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated tokenizing threads per run (0: encode; default 0,auto)."
        ),
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, help="Texts per forward pass.")
    ] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu, cuda or mps.")] = "auto",
    model: Annotated[
        Path | None, typer.Option("--model", help="Model directory (default: embeddings.path).")
    ] = None,
    corpus: Annotated[
        Path | None, typer.Option(help="Abstracts (.jsonl(.gz); default: ../shared's).")
    ] = None,
    end_to_end: Annotated[
        bool,
        typer.Option(
            "--end-to-end",
            help="Also run `quorum index --no-embeddings` and `quorum embed` on the same texts "
            "(a scratch index): the command's docs/s beside its encoder's.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """`quorum embed`'s encoder on real abstracts: docs/s, hours for PubMed's 26 M, memory."""
    from graphs.cli.train import device_choice
    from infra.corpus_encoder import workers_for
    from infra.embeddings import default_model_dir, resolve_device
    from lab.bench.embed import bench_embed, bench_embed_command
    from lab.bench.scale import default_inputs

    chosen = resolve_device(device_choice(device), "--device")
    corpus = corpus_file(corpus, default_inputs()[0], "no abstracts to embed")
    model = model or settings_for().embeddings.path or default_model_dir()
    if not (model / "config.json").is_file():
        raise CliError(f"{model}: no model there (config.json missing); pass --model DIR")
    try:
        counts = (
            [int(w) for w in workers.split(",") if w.strip()]
            if workers
            else sorted({0, workers_for(chosen, None)})
        )
    except ValueError:
        raise CliError(f"--workers {workers!r}: give whole numbers, e.g. 0,4,15") from None
    if not counts or min(counts) < 0:
        raise CliError(f"--workers {workers!r}: give counts of 0 or more, e.g. 0,4,15")
    report = bench_embed(
        model,
        corpus,
        size=docs,
        device=chosen,
        words=words,
        workers=counts,
        batch_size=batch_size,
    )
    if end_to_end:
        report["command"] = bench_embed_command(
            model, corpus, size=docs, device=chosen, words=words
        )
    emit(report, as_json)


@bench_app.command("train", context_settings={"allow_extra_args": True})
def bench_train_cmd(
    ctx: typer.Context,
    kind: Annotated[str, typer.Option("--kind", help="retriever or reranker.")] = "retriever",
    questions: Annotated[
        list[Path] | None,
        typer.Option("--questions", help="BioASQ golden files (default: ../shared's 2,310)."),
    ] = None,
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Their documents (default: ../shared's).")
    ] = None,
    level: Annotated[
        str, typer.Option("--level", help="reranker: document or sentence.")
    ] = TRAINING.level,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Epochs.")] = TRAINING.epochs,
    device: Annotated[
        str, typer.Option("--device", help="auto, cpu, cuda or mps.")
    ] = TRAINING.device,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Keep the model here (default: trained, timed, removed)."),
    ] = None,
    base: Annotated[
        Path | None,
        typer.Option("--base", help="Starting model directory (default: all-MiniLM-L6-v2)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """One `quorum train` run timed here: whole run and steps, against the 45-minute epoch."""
    from graphs.cli.train import RERANKER_BATCH, base_model, checked_inputs, device_choice
    from lab.bench.scale import default_inputs
    from lab.bench.train import bench_train

    if kind not in ("retriever", "reranker"):
        raise CliError(f"unknown --kind {kind!r}; choose retriever or reranker")
    if level not in ("document", "sentence"):
        raise CliError(f"unknown --level {level!r}; choose document or sentence")
    shared_corpus, shared_questions = default_inputs()
    # Files given after --questions (a shell glob) are sorted by kind in checked_inputs.
    files = list(questions or []) or ([] if ctx.args else shared_questions)
    corpora = [corpus] if corpus else [shared_corpus] if shared_corpus else []
    if not (files or ctx.args) or not corpora:
        raise CliError(
            "no training data: pass --questions FILE.json … and --corpus FILE.jsonl.gz "
            "(../shared/data is not beside this checkout)"
        )
    files, corpora = checked_inputs(ctx, files, corpora, output)
    options = TrainOptions(
        epochs=epochs,
        device=device_choice(device),  # type: ignore[arg-type]
        batch_size=TRAINING.batch_size if kind == "retriever" else RERANKER_BATCH,
        level=level,  # type: ignore[arg-type]
        base_model=base_model(base),
    )
    report = bench_train(kind, files, corpora, options, output)
    if as_json:
        write_json(report)
        return
    print_report({k: v for k, v in report.items() if k not in ("dev", "settings_lines")})


@bench_app.command("pipeline")
def bench_pipeline_cmd(
    llm_latency: Annotated[
        float,
        typer.Option("--llm-latency", min=0.0, max=60.0, help="Seconds every LLM call takes."),
    ] = 1.0,
    models: Annotated[int, typer.Option("--models", min=1, max=16, help="Ensemble models.")] = 3,
    members: Annotated[
        int, typer.Option("--members", min=1, max=32, help="Views (K) per ensemble model.")
    ] = 5,
    runs: Annotated[int, typer.Option(min=1, max=20, help="Runs; the fastest is reported.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """The whole graph against a simulated OpenAI-compatible endpoint: how calls overlap."""
    from lab.bench.pipeline import bench_pipeline

    report = bench_pipeline(
        settings_for(), latency_s=llm_latency, models=models, members=members, runs=runs
    )
    if as_json:
        write_json(report)
        return
    for key in ("wall_s", "llm_calls", "critical_path_calls", "bound_s", "overlap", "failed_calls"):
        out.print(f"{key:>20}  {report[key]}")
    out.print(f"{'calls_by_node':>20}  {json.dumps(report['calls_by_node'])}")


@bench_app.command("batch")
def bench_batch_cmd(
    questions: Annotated[
        int, typer.Option("--questions", min=1, max=5000, help="Questions in the batch.")
    ] = 50,
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Questions the batch answers at once.")
    ] = 16,
    llm_latency: Annotated[
        float,
        typer.Option("--llm-latency", min=0.0, max=60.0, help="Seconds every LLM call takes."),
    ] = 1.0,
    input_path: Annotated[
        Path | None,
        typer.Option("--input", help="BioASQ JSON to take the questions from (default: 11B*)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """A BioASQ batch against a simulated endpoint: wall time against the ideal N/C · chain · L."""
    from lab.bench.batch import bench_batch

    try:
        report = bench_batch(
            settings_for(),
            questions=questions,
            concurrency=concurrency,
            latency_s=llm_latency,
            input_path=input_path,
        )
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    if as_json:
        write_json(report)
        return
    print_report(report)


@bench_app.command("faults")
def bench_faults_cmd(
    questions: Annotated[
        int, typer.Option("--questions", min=1, max=5000, help="Questions in the batch.")
    ] = 100,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the faults and the kill point.")] = 0,
    input_path: Annotated[
        Path | None,
        typer.Option("--input", help="BioASQ JSON to take them from (default: 11B*_golden)."),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend", help="embedded (index renamed away) or elasticsearch (node restarted)."
        ),
    ] = "embedded",
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Questions the batch answers at once.")
    ] = 4,
    keep: Annotated[
        Path | None,
        typer.Option("--keep", help="Run in this new directory and keep it (traces, journal)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """A BioASQ batch against a faulty endpoint, killed and resumed: is every fault absorbed?"""
    from lab.bench.fault_evidence import table
    from lab.bench.faults import bench_faults

    search: dict[str, str] = {}
    es_dir = es_port = None
    if backend not in BACKENDS:
        raise CliError(f"unknown --backend {backend!r}; choose {' or '.join(BACKENDS)}")
    if backend == "elasticsearch":  # the drill restarts a node of its own
        es_dir, es_port, url = _managed_elasticsearch()
        search = {"backend": "elasticsearch", "elasticsearch_url": url}
    if input_path is not None and not input_path.is_file():
        raise CliError(f"{input_path}: no such file")
    try:
        report = bench_faults(
            questions=questions,
            seed=seed,
            input_path=input_path,
            concurrency=concurrency,
            search=search,
            es_dir=es_dir,
            es_port=es_port,
            keep=keep,
        )
    except (FileNotFoundError, FileExistsError) as exc:
        raise CliError(str(exc)) from None
    if as_json:
        write_json(report)
        return
    for line in table(report):
        out.print(line, markup=False)


def _managed_elasticsearch() -> tuple[Path, int, str]:
    """Return the work dir ($QUORUM_ES_DIR), port and URL of a node this bench may restart."""
    from urllib.parse import urlsplit

    from lab.elasticsearch_server import default_dir, status

    url = settings_for().search.elasticsearch_url
    port = urlsplit(url).port or 9200
    work = default_dir()
    if status(work, port)[1] is None:
        raise CliError(
            f"no Elasticsearch node of {work} answers on {url}; start one with "
            f"`python -m lab.elasticsearch_server start --dir {work} --port {port}`"
        )
    return work, port, url


def emit(report: dict, as_json: bool) -> None:
    """Print the report: exactly one JSON object with --json, else indented for reading."""
    if as_json:
        write_json(report)
        return
    out.print(json.dumps(report, indent=2))


def corpus_file(given: Path | None, shared: Path | None, missing: str) -> Path:
    """Return the corpus given, else ../shared's; refuse, naming what to pass, when neither is."""
    corpus = given or shared
    if corpus is None:
        raise CliError(
            f"{missing}: pass --corpus FILE.jsonl.gz (../shared/data/corpus/"
            "pubmed_docs.jsonl.gz is not beside this checkout)"
        )
    if not corpus.is_file():
        raise CliError(f"{corpus}: no such file")
    return corpus
