"""`quorum eval …`: quorum measured on a user's own golden data (retrieval, snippets, support).

The lab adds the methods' trials to this group (`eval organize`, `ensemble`, `methods`,
`likelihoods`: lab/cli/eval_methods.py) when graphs/cli loads it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli.common import (
    CliError,
    backend_names,
    extra_files,
    out,
    print_report,
    settings_for,
    write_json,
)

eval_app = typer.Typer(no_args_is_help=True, help="Measure quorum on golden data.")

GoldenOption = Annotated[
    list[Path],
    typer.Option("--questions", help="BioASQ golden JSON files (--questions A B C …)."),
]
BACKENDS = backend_names()
BackendOption = Annotated[str | None, typer.Option("--backend", help=f"{' or '.join(BACKENDS)}.")]
IndexOption = Annotated[str | None, typer.Option("--index", help="Index name (default: settings).")]


@eval_app.command("retrieval", context_settings={"allow_extra_args": True})
def eval_retrieval(
    ctx: typer.Context,
    questions: GoldenOption,
    backend: BackendOption = None,
    name: IndexOption = None,
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
    dense_candidates: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=10_000,
            help="Nearest documents by vector added to BM25's (default: search.dense_candidates).",
        ),
    ] = None,
    cross_encoder_weights: Annotated[
        str | None,
        typer.Option(
            help="Cross-encoder blend weights to compare on the same first stage, e.g. "
            "0,0.3,0.5,0.9 (needs rerank.cross_encoder.path).",
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Document recall@10/100/1000, BioASQ MAP, snippet recall and latency on golden questions."""
    from graphs.eval.retrieval import evaluate_retrieval
    from graphs.runtime import build_context
    from infra.bioasq.formats import load_questions

    if query_mode not in ("question", "llm"):
        raise CliError(f"unknown --query-mode {query_mode!r}; choose question or llm")
    if backend is not None and backend not in BACKENDS:
        raise CliError(f"unknown --backend {backend!r}; choose {' or '.join(BACKENDS)}")
    paths = [*questions, *extra_files(ctx)]
    loaded = [q for path in paths for q in load_questions(path)][:limit]
    search = {
        k: v
        for k, v in (("backend", backend), ("index", name), ("dense_candidates", dense_candidates))
        if v is not None
    }
    settings = settings_for(search=search) if search else settings_for()
    weights = None
    if cross_encoder_weights is not None:
        weights = _grid(cross_encoder_weights, "--cross-encoder-weights", float, [], "0,0.3,0.5")
        if any(w is None or not 0 <= w <= 1 for w in weights):
            raise CliError("--cross-encoder-weights: give weights from 0 to 1, e.g. 0,0.3,0.5")
        if settings.rerank.cross_encoder.path is None or no_rerank:
            raise CliError(
                "--cross-encoder-weights needs a cross-encoder: set "
                "QUORUM_RERANK__CROSS_ENCODER__PATH (and leave out --no-rerank)"
            )
    from infra.models import ModelPool

    # Retrieval asks no model: the models' endpoints are neither checked nor needed.
    context = build_context(settings, models=ModelPool(settings))
    report = asyncio.run(
        evaluate_retrieval(
            context,
            loaded,
            query_mode=query_mode,
            reranked=not no_rerank,
            snippets=snippets,
            weights=weights,
        )
    )
    if as_json:
        write_json(report)
        return
    rows = report.pop("cross_encoder_weights", None)
    print_report(report, 20)
    if rows:
        out.print("cross-encoder weight  recall@10  recall@100     MAP")
        for row in rows:
            out.print(
                f"{row['weight']:>20g} {row['doc_recall@10']:>10} {row['doc_recall@100']:>11} "
                f"{row['doc_map']:>7}",
                markup=False,
            )


@eval_app.command("snippets", context_settings={"allow_extra_args": True})
def eval_snippets(
    ctx: typer.Context,
    questions: GoldenOption,
    backend: BackendOption = None,
    name: IndexOption = None,
    documents: Annotated[
        str | None,
        typer.Option(help="Top documents snippets come from, e.g. 3,5,10 (default: settings)."),
    ] = None,
    per_document: Annotated[
        str | None, typer.Option(help="Snippets from one document at most, e.g. 1,2,5.")
    ] = None,
    max_snippets: Annotated[
        str | None, typer.Option(help="Snippets per question at most, e.g. 5,10.")
    ] = None,
    min_score: Annotated[
        str | None,
        typer.Option(
            help="Score floors in the scorer's units, 'none' for no floor, e.g. none,0,2."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Phase-A snippets' BioASQ F-measure over a grid of selection settings, best first."""
    from graphs.eval.snippets import evaluate_snippets
    from graphs.runtime import build_context
    from infra.bioasq.formats import load_questions

    if backend is not None and backend not in BACKENDS:
        raise CliError(f"unknown --backend {backend!r}; choose {' or '.join(BACKENDS)}")
    search = {k: v for k, v in (("backend", backend), ("index", name)) if v is not None}
    settings = settings_for(search=search) if search else settings_for()
    chosen = settings.snippets
    grid = {
        "documents": _grid(documents, "--documents", int, [chosen.documents]),
        "per_document": _grid(per_document, "--per-document", int, [chosen.per_document]),
        "limits": _grid(max_snippets, "--max-snippets", int, [chosen.limit]),
        "min_scores": _grid(min_score, "--min-score", float, [chosen.min_score]),
    }
    paths = [*questions, *extra_files(ctx)]
    loaded = [q for path in paths for q in load_questions(path)][:limit]
    if not any(q.snippets for q in loaded):
        raise CliError("these files hold no question with gold snippets; give golden files")
    from infra.models import ModelPool

    # Snippets are chosen without a model: its endpoints are neither checked nor needed.
    context = build_context(settings, models=ModelPool(settings))
    report = asyncio.run(evaluate_snippets(context, loaded, **grid))
    if as_json:
        write_json(report)
        return
    head = {k: v for k, v in report.items() if k not in ("rows", "best")}
    print_report(head, 16)
    out.print("documents per_doc limit min_score     F1  precision  recall  per_question  F1@text")
    for row in report["rows"][:20]:
        floor = "none" if row["min_score"] is None else f"{row['min_score']:g}"
        out.print(
            f"{row['documents']:>9} {row['per_document']:>7} {row['limit']:>5} {floor:>9} "
            f"{row['snippets_f1']:>6.4f} {row['snippets_precision']:>10.4f} "
            f"{row['snippets_recall']:>7.4f} {row['snippets_per_question']:>13} "
            f"{row['snippets_f1_at_text']:>8.4f}",
            markup=False,
        )


@eval_app.command("support", context_settings={"allow_extra_args": True})
def eval_support(
    ctx: typer.Context,
    questions: GoldenOption,
    no_verify: Annotated[
        bool,
        typer.Option("--no-verify", help="The model-free check alone, even with a verifier."),
    ] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """The support check on golden answers: gold refused (false), another's accepted (swap)."""
    from graphs.eval.support import support_report
    from infra.bioasq.formats import load_questions

    paths = [*questions, *extra_files(ctx)]
    loaded = [q for path in paths for q in load_questions(path)][:limit]
    if not any(q.snippets for q in loaded):
        raise CliError("these files hold no question with gold snippets; give golden files")
    report = asyncio.run(support_report(settings_for(), loaded, verify=not no_verify))
    if as_json:
        write_json(report)
        return
    out.print(f"questions {report['questions']} (gold snippets as the cited evidence)")
    head = "type      n  false refusal  swap refusal  contradictory  kept  swap refused"
    for title, key in (("model-free", "by_type"), ("with the verifier", "by_type_verified")):
        if key not in report:
            continue
        out.print(f"{title}:  {head}", markup=False)
        for qtype, row in report[key].items():
            line = (
                f"  {qtype:>17} {row['n']:>5} {row['false_refusal']:>14.1%} "
                f"{row['swap_refusal']:>13.1%}"
            )
            if "relevance_kept" in row:
                line += (
                    f" {row['gold_contradictory']:>14} {_share(row['relevance_kept']):>5} "
                    f"{_share(row['relevance_swap_refused']):>13}"
                )
            out.print(line, markup=False)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _grid(
    text: str | None, flag: str, kind: type, default: list, example: str | None = None
) -> list:
    """Parse a comma-separated list of values ('none' allowed for floats) or use the default."""
    example = example or ("3,5" if kind is int else "none,0,2")
    if text is None:
        return default
    values: list = []
    for part in (p.strip() for p in text.split(",")):
        if kind is float and part.lower() == "none":
            values.append(None)
            continue
        try:
            value = kind(part)
        except ValueError:
            raise CliError(
                f"{flag}: {part!r} is not a{'n integer' if kind is int else ' number'}; "
                f"give a comma-separated list such as {example}"
            ) from None
        if kind is int and value < 1:
            raise CliError(f"{flag}: {value} must be at least 1")
        values.append(value)
    if not values:
        raise CliError(f"{flag}: give at least one value")
    return list(dict.fromkeys(values))
