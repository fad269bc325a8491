"""`quorum eval …` and `quorum bench …`: measurements over golden data and corpora."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli_common import CliError, extra_files, out, settings_for

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
        sys.stdout.write(json.dumps(report) + "\n")
        return
    for key, value in report.items():
        out.print(f"{key:>20}  {value}")


@eval_app.command("organize")
def eval_organize(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="ConflictQA .jsonl or BioASQ golden .json.")
    ],
    strategy: Annotated[
        str, typer.Option("--strategy", help="corg, dedupe, base, separate, random or kmeans.")
    ] = "corg",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
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
    cases = load_cases(dataset)[:limit]
    settings = settings_for(organize={"strategy": strategy})
    report = asyncio.run(evaluate_organize(build_context(settings), cases))
    if as_json:
        sys.stdout.write(json.dumps(report) + "\n")
        return
    for key, value in report.items():
        out.print(f"{key:>22}  {value}")


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
        sys.stdout.write(json.dumps(report) + "\n")
        return
    out.print(json.dumps(report, indent=2))
