"""`quorum bench retrieval`, `bench scale` and `bench dense`: the search engines' benches.

Registered on the `bench` group (lab/cli/bench.py) when graphs/cli assembles the command line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli.common import CliError, extra_files, require_lab, settings_for
from lab.cli.bench import BACKENDS, bench_app, corpus_file, emit


@bench_app.command("retrieval", context_settings={"allow_extra_args": True})
def bench_retrieval_cmd(
    ctx: typer.Context,
    corpus: Annotated[Path, typer.Option("--corpus", help="A .jsonl(.gz) corpus to index.")],
    questions: Annotated[
        list[Path], typer.Option("--questions", help="BioASQ JSON files (queries).")
    ],
    backends: Annotated[
        str, typer.Option(help=f"Comma-separated: {','.join(BACKENDS)}.")
    ] = "embedded",
    limit: Annotated[int, typer.Option(min=1, help="Questions timed.")] = 500,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Embedded vs Elasticsearch: ingestion docs/s, 10,000-candidate query latency, memory."""
    from infra.bioasq.formats import load_questions
    from lab.bench.retrieval import bench_retrieval

    chosen = _backends(backends)
    if not corpus.is_file():
        raise CliError(f"{corpus}: no such file")
    loaded = [q for path in [*questions, *extra_files(ctx)] for q in load_questions(path)][:limit]
    report = bench_retrieval(settings_for(), corpus, loaded, chosen)
    emit(report, as_json)


@bench_app.command("scale", context_settings={"allow_extra_args": True})
def bench_scale_cmd(
    ctx: typer.Context,
    sizes: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated corpus sizes (each holds the real documents; default "
            "200000,1000000)."
        ),
    ] = None,
    backends: Annotated[
        str, typer.Option(help=f"Comma-separated: {','.join(BACKENDS)}.")
    ] = "embedded,elasticsearch",
    corpus: Annotated[
        Path | None,
        typer.Option(help="Real documents to resample (.jsonl(.gz); default: ../shared's)."),
    ] = None,
    questions: Annotated[
        list[Path] | None,
        typer.Option("--questions", help="BioASQ JSON files (default: ../shared's golden files)."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Questions timed.")] = 500,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic corpora.")] = 0,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the indexes it builds.")] = False,
    elasticsearch_up_to: Annotated[
        int | None,
        typer.Option(
            "--elasticsearch-up-to",
            min=1,
            help="Largest size Elasticsearch is loaded with (default 2,000,000; larger sizes: "
            "the embedded engine alone).",
        ),
    ] = None,
    text_only_up_to: Annotated[
        int | None,
        typer.Option(
            "--text-only-up-to",
            min=0,
            help="Largest size also built without vectors, for its ingestion rate (default "
            "5,000,000; above it the disk without vectors is the text files').",
        ),
    ] = None,
    merge: Annotated[
        list[Path] | None,
        typer.Option(
            "--merge",
            help="Measure nothing: put these earlier reports (--json output or the run's "
            "report.json; --merge a.json b.json) on one report, the targets and projection "
            "over all their sizes.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Synthetic corpora of growing size: ingestion, disk, memory and query latency per engine.

    With --merge, earlier runs' reports on one report instead (docs/retrieval.md).
    """
    from infra.bioasq.formats import load_questions
    from lab.bench.scale import (
        ELASTICSEARCH_UP_TO,
        TEXT_ONLY_UP_TO,
        bench_scale,
        default_inputs,
    )

    if merge:
        if sizes is not None:
            raise CliError("give --sizes to measure or --merge to combine reports, not both")
        emit(_merged([*merge, *extra_files(ctx)]), as_json)
        return
    require_lab("bm25s", "numba")  # the BM25 peer, timed last in a child process
    wanted = _sizes(sizes or "200000,1000000")
    chosen = _backends(backends)
    shared_corpus, shared_questions = default_inputs()
    corpus = corpus_file(corpus, shared_corpus, "no corpus to resample")
    files = _question_files(ctx, questions, shared_questions, "no questions to time")
    loaded = [q for path in files for q in load_questions(path) if q.documents][:limit]
    settings = settings_for()
    elasticsearch_up_to = elasticsearch_up_to or ELASTICSEARCH_UP_TO
    if "elasticsearch" in chosen and min(wanted) <= elasticsearch_up_to:
        from infra.search.backends import check_elasticsearch

        check_elasticsearch(settings)
    report = bench_scale(
        settings,
        corpus,
        loaded,
        wanted,
        chosen,
        seed=seed,
        keep=keep,
        elasticsearch_up_to=elasticsearch_up_to,
        text_only_up_to=TEXT_ONLY_UP_TO if text_only_up_to is None else text_only_up_to,
    )
    emit(report, as_json)


@bench_app.command("dense", context_settings={"allow_extra_args": True})
def bench_dense_cmd(
    ctx: typer.Context,
    sizes: Annotated[
        str, typer.Option(help="Comma-separated synthetic set sizes (the real set always runs).")
    ] = "1000000",
    shares: Annotated[
        str, typer.Option(help="Comma-separated shares of the IVF lists probed.")
    ] = "0.03125,0.0625,0.125,0.25",
    corpus: Annotated[
        Path | None,
        typer.Option(help="Real documents whose vectors are used (default: ../shared's)."),
    ] = None,
    questions: Annotated[
        list[Path] | None,
        typer.Option("--questions", help="BioASQ JSON files (default: ../shared's golden files)."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Questions asked.")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic sets and of k-means.")] = 0,
    elasticsearch: Annotated[
        bool,
        typer.Option(
            "--elasticsearch",
            help="Also Elasticsearch's int8_hnsw and bbq_hnsw on the same vectors "
            "(search.elasticsearch_url).",
        ),
    ] = False,
    candidates: Annotated[
        str,
        typer.Option(help="Comma-separated knn candidates per result (with --elasticsearch)."),
    ] = "1.5,4,10",
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """The approximate dense stage (IVF) against the exact scan: recall@100, latency, build."""
    from lab.bench.dense import bench_dense, dense_inputs
    from lab.bench.scale import default_inputs

    wanted = _sizes(sizes)
    try:
        probed = [float(s) for s in shares.split(",") if s.strip()]
        factors = [float(s) for s in candidates.split(",") if s.strip()]
    except ValueError:
        raise CliError(f"--shares {shares!r} / --candidates {candidates!r}: give numbers") from None
    if not factors or not all(1 <= f <= 100 for f in factors):
        raise CliError(f"--candidates {candidates!r}: give factors from 1 to 100, e.g. 1.5,4")
    if not probed or not all(0 < s <= 1 for s in probed):
        raise CliError(f"--shares {shares!r}: give shares above 0 and at most 1, e.g. 0.125")
    shared_corpus, shared_questions = default_inputs()
    corpus = corpus_file(corpus, shared_corpus, "no real documents")
    files = _question_files(ctx, questions, shared_questions, "no questions")
    settings = settings_for()
    if elasticsearch:
        from infra.search.backends import check_elasticsearch

        check_elasticsearch(settings)
    inputs = dense_inputs(settings, corpus, files, limit, wanted)
    report = bench_dense(
        *inputs.sets,
        wanted,
        probed,
        seed=seed,
        work=inputs.work,
        elasticsearch=settings if elasticsearch else None,
        candidates=factors,
    )
    report["model"] = inputs.model
    emit(report, as_json)


def _merged(files: list[Path]) -> dict:
    """Load the reports and merge them; refuse, in one line, a file that is not one."""
    from lab.bench.scale_report import merge

    reports = []
    for path in files:
        try:
            reports.append((str(path), json.loads(path.read_text())))
        except OSError as exc:
            raise CliError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise CliError(
                f"{path}: not JSON ({exc}); give a `bench scale --json` report"
            ) from None
    try:
        return merge(reports, settings_for().search.row_codes_rows)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _question_files(
    ctx: typer.Context, given: list[Path] | None, shared: list[Path], missing: str
) -> list[Path]:
    """Return the golden files given (after --questions too), else ../shared's; refuse if none."""
    files = [*(given or []), *extra_files(ctx)] or shared
    if not files:
        raise CliError(f"{missing}: pass --questions FILE.json (BioASQ golden files)")
    return files


def _backends(given: str) -> list[str]:
    """Return the comma-separated engines given; refuse one quorum does not have."""
    chosen = [b.strip() for b in given.split(",") if b.strip()]
    if bad := [b for b in chosen if b not in BACKENDS]:
        raise CliError(f"unknown backend {bad[0]!r}; choose {' and/or '.join(BACKENDS)}")
    return chosen


def _sizes(given: str) -> list[int]:
    """Return the comma-separated corpus sizes given, sorted; refuse what is not a whole number."""
    try:
        return sorted({int(s.replace("_", "")) for s in given.split(",") if s.strip()})
    except ValueError:
        raise CliError(f"--sizes {given!r}: give whole numbers, e.g. 200000,1000000") from None
