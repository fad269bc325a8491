"""`quorum eval …` and `quorum bench …`: measurements over golden data and corpora."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli_common import CliError, extra_files, out, print_report, settings_for, write_json

eval_app = typer.Typer(no_args_is_help=True, help="Measure quorum on golden data.")
bench_app = typer.Typer(no_args_is_help=True, help="Speed and memory benchmarks.")


@eval_app.command("retrieval", context_settings={"allow_extra_args": True})
def eval_retrieval(
    ctx: typer.Context,
    questions: Annotated[
        list[Path],
        typer.Option("--questions", help="BioASQ golden JSON files (--questions A B C …)."),
    ],
    backend: Annotated[
        str | None, typer.Option("--backend", help="embedded or elasticsearch.")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--index", help="Index name (default: settings).")
    ] = None,
    query_mode: Annotated[
        str,
        typer.Option("--query-mode", help="question: its keywords; llm: generate_query + refine."),
    ] = "question",
    no_rerank: Annotated[
        bool, typer.Option("--no-rerank", help="Score BM25's order alone.")
    ] = False,
    snippets: Annotated[
        bool, typer.Option("--snippets", help="Also score snippets (slower).")
    ] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Document recall@10/100/1000, BioASQ MAP, snippet recall and latency on golden questions."""
    from graphs.evaluate import evaluate_retrieval
    from graphs.runtime import build_context
    from infra.bioasq.formats import load_questions

    if query_mode not in ("question", "llm"):
        raise CliError(f"unknown --query-mode {query_mode!r}; choose question or llm")
    if backend is not None and backend not in ("embedded", "elasticsearch"):
        raise CliError(f"unknown --backend {backend!r}; choose embedded or elasticsearch")
    paths = [*questions, *extra_files(ctx)]
    loaded = [q for path in paths for q in load_questions(path)][:limit]
    search = {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}
    settings = settings_for(search=search) if search else settings_for()
    context = build_context(settings)
    report = asyncio.run(
        evaluate_retrieval(
            context, loaded, query_mode=query_mode, reranked=not no_rerank, snippets=snippets
        )
    )
    if as_json:
        write_json(report)
        return
    print_report(report, 20)


@eval_app.command("organize")
def eval_organize(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="ConflictQA .jsonl or BioASQ golden .json.")
    ],
    strategy: Annotated[
        str, typer.Option("--strategy", help="corg, dedupe, base, separate, random or kmeans.")
    ] = "corg",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    min_snippets: Annotated[
        int, typer.Option(min=0, help="BioASQ: only questions with at least N gold snippets.")
    ] = 0,
    match_corg: Annotated[
        bool,
        typer.Option(help="random/kmeans: use the group count CORG finds for each question."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Answer, entity and entity-answer recall of an organize strategy, with its relation calls."""
    from graphs.evaluate_organize import evaluate_organize, load_cases
    from graphs.runtime import build_context

    strategies = ("corg", "dedupe", "base", "separate", "random", "kmeans")
    if strategy not in strategies:
        raise CliError(f"unknown --strategy {strategy!r}; choose one of {', '.join(strategies)}")
    if not dataset.is_file():
        raise CliError(f"{dataset}: no such file")
    cases = [c for c in load_cases(dataset) if c.snippets >= min_snippets][:limit]
    settings = settings_for(organize={"strategy": strategy})
    report = asyncio.run(evaluate_organize(build_context(settings), cases, match_corg=match_corg))
    if as_json:
        write_json(report)
        return
    print_report(report, 22)


@eval_app.command("ensemble")
def eval_ensemble(
    dataset: Annotated[
        Path,
        typer.Option(
            "--dataset", help="NaturalQuestions-open .jsonl(.gz) or BioASQ golden .json (yes/no)."
        ),
    ],
    strategies: Annotated[
        str,
        typer.Option(
            "--strategies",
            help="Comma-separated: single, self_consistency, permute_vote, cobag, ccv, moi "
            "(permute_vote always runs, as the reference).",
        ),
    ] = "single,permute_vote,cobag,ccv,moi",
    models: Annotated[
        int | None,
        typer.Option(
            "--models",
            min=1,
            help="Ensemble models: the configured list repeated or cut to N (one model "
            "configured: N copies of it, each answering every view).",
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    distractors: Annotated[
        int, typer.Option(min=0, help="NaturalQuestions: BM25 distractors per gold passage.")
    ] = 9,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Ensemble strategies on the same contexts: accuracy, cost, agreement, McNemar test."""
    from graphs.evaluate_ensemble import (
        STRATEGIES,
        evaluate_ensemble,
        load_cases,
        table,
        with_models,
    )
    from graphs.runtime import build_context

    chosen = [s.strip() for s in strategies.split(",") if s.strip()]
    if bad := [s for s in chosen if s not in STRATEGIES]:
        raise CliError(f"unknown strategy {bad[0]!r}; choose from {', '.join(STRATEGIES)}")
    if not dataset.is_file():
        raise CliError(f"{dataset}: no such file")
    settings = settings_for()
    cases = load_cases(dataset, distractors=distractors, limit=limit, seed=settings.ensemble.seed)
    if not cases:
        raise CliError(f"{dataset}: no usable questions")
    if models is not None:
        settings = with_models(settings, models)
    report = asyncio.run(
        evaluate_ensemble(build_context(settings), cases, chosen, dataset=dataset.name)
    )
    if as_json:
        write_json(report)
        return
    for line in table(report):
        out.print(line, markup=False)


@bench_app.command("retrieval", context_settings={"allow_extra_args": True})
def bench_retrieval_cmd(
    ctx: typer.Context,
    corpus: Annotated[Path, typer.Option("--corpus", help="A .jsonl(.gz) corpus to index.")],
    questions: Annotated[
        list[Path], typer.Option("--questions", help="BioASQ JSON files (queries).")
    ],
    backends: Annotated[
        str, typer.Option(help="Comma-separated: embedded,elasticsearch.")
    ] = "embedded",
    limit: Annotated[int, typer.Option(min=1, help="Questions timed.")] = 500,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Embedded vs Elasticsearch: ingestion docs/s, 10,000-candidate query latency, memory."""
    from graphs.bench import bench_retrieval
    from infra.bioasq.formats import load_questions

    chosen = [b.strip() for b in backends.split(",") if b.strip()]
    if bad := [b for b in chosen if b not in ("embedded", "elasticsearch")]:
        raise CliError(f"unknown backend {bad[0]!r}; choose embedded and/or elasticsearch")
    loaded = [q for path in [*questions, *extra_files(ctx)] for q in load_questions(path)][:limit]
    report = bench_retrieval(settings_for(), corpus, loaded, chosen)
    if as_json:
        write_json(report)
        return
    out.print(json.dumps(report, indent=2))


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
    from graphs.bench_pipeline import bench_pipeline

    report = bench_pipeline(
        settings_for(), latency_s=llm_latency, models=models, members=members, runs=runs
    )
    if as_json:
        write_json(report)
        return
    for key in ("wall_s", "llm_calls", "critical_path_calls", "bound_s", "overlap", "failed_calls"):
        out.print(f"{key:>20}  {report[key]}")
    out.print(f"{'calls_by_node':>20}  {json.dumps(report['calls_by_node'])}")


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
    from graphs.bench_faults import bench_faults
    from graphs.fault_evidence import table

    search: dict[str, str] = {}
    es_dir = es_port = None
    if backend == "elasticsearch":
        es_dir, es_port, url = _managed_elasticsearch()
        search = {"backend": "elasticsearch", "elasticsearch_url": url}
    elif backend != "embedded":
        raise CliError(f"unknown --backend {backend!r}; choose embedded or elasticsearch")
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

    from infra.elasticsearch_server import default_dir, status

    url = settings_for().search.elasticsearch_url
    port = urlsplit(url).port or 9200
    work = default_dir()
    if status(work, port)[1] is None:
        raise CliError(
            f"no Elasticsearch node of {work} answers on {url}; start one with "
            f"`python -m infra.elasticsearch_server start --dir {work} --port {port}`"
        )
    return work, port, url
