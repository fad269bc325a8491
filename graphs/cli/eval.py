"""`quorum eval …`: quorum measured on golden data (retrieval, organize, ensemble)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli.common import CliError, extra_files, out, print_report, settings_for, write_json
from infra.backends import BACKENDS
from infra.settings import EnsembleSettings, OrganizeSettings, choices

ORGANIZE_STRATEGIES = choices(OrganizeSettings, "strategy")
ENSEMBLE_STRATEGIES = choices(EnsembleSettings, "strategy")

eval_app = typer.Typer(no_args_is_help=True, help="Measure quorum on golden data.")

GoldenOption = Annotated[
    list[Path],
    typer.Option("--questions", help="BioASQ golden JSON files (--questions A B C …)."),
]
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
    context = build_context(settings)
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
    report = asyncio.run(evaluate_snippets(build_context(settings), loaded, **grid))
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


@eval_app.command("organize")
def eval_organize(
    dataset: Annotated[
        Path,
        typer.Option(
            "--dataset",
            help="ConflictQA .jsonl (rebuilt into 4-passage cases) or BioASQ golden .json.",
        ),
    ],
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            help=f"{', '.join(ORGANIZE_STRATEGIES[:-1])} or {ORGANIZE_STRATEGIES[-1]}.",
        ),
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
    """D-F1, recalls, split and collapse of planted conflicts, and relation calls of a strategy."""
    from graphs.eval.organize import evaluate_organize, load_cases
    from graphs.runtime import build_context

    if strategy not in ORGANIZE_STRATEGIES:
        raise CliError(
            f"unknown --strategy {strategy!r}; choose one of {', '.join(ORGANIZE_STRATEGIES)}"
        )
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
            help=f"Comma-separated: {', '.join(ENSEMBLE_STRATEGIES)} "
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
    from graphs.eval.ensemble import evaluate_ensemble, load_cases, table, with_models
    from graphs.runtime import build_context

    chosen = [s.strip() for s in strategies.split(",") if s.strip()]
    if bad := [s for s in chosen if s not in ENSEMBLE_STRATEGIES]:
        raise CliError(f"unknown strategy {bad[0]!r}; choose from {', '.join(ENSEMBLE_STRATEGIES)}")
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


@eval_app.command("methods")
def eval_methods(
    dataset: Annotated[
        Path,
        typer.Option(
            "--dataset",
            help="NaturalQuestions-open .jsonl(.gz) (hard distractors are planted) or "
            "ConflictQA .jsonl (rebuilt into 4-passage cases).",
        ),
    ],
    reader: Annotated[
        str | None,
        typer.Option(
            "--reader",
            help="planted: a simulated reader with planted biases answers every model role; "
            "local: the local provider's default (demo) model plays every role (default: the "
            "configured models).",
        ),
    ] = None,
    reader_seed: Annotated[
        int | None,
        typer.Option("--reader-seed", help="Planted reader's seed (--reader-set seed=N)."),
    ] = None,
    reader_curve: Annotated[
        str | None,
        typer.Option(
            "--reader-curve",
            help="Planted reader's position curve: liu (default, measured), u, primacy, "
            "recency or flat (--reader-set curve=NAME).",
        ),
    ] = None,
    reader_set: Annotated[
        list[str] | None,
        typer.Option(
            "--reader-set",
            metavar="KEY=VALUE",
            help="Any planted reader setting, repeatable, e.g. --reader-set override=0 "
            "--reader-set sample_agreement=0.9 (keys: infra/simulate/bias.py ReaderSettings).",
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only N questions.")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip the first N usable questions.")] = 0,
    strategies: Annotated[
        str,
        typer.Option(
            "--strategies",
            help=f"Comma-separated: {', '.join(ENSEMBLE_STRATEGIES)} (ensemble.strategy) and "
            "corg (organize.strategy=corg).",
        ),
    ] = ",".join((*ENSEMBLE_STRATEGIES, "corg")),
    rows: Annotated[
        Path | None,
        typer.Option("--rows", help="Write one JSON line per strategy and question here."),
    ] = None,
    ablations: Annotated[
        bool,
        typer.Option(
            "--ablations",
            help="Also run the papers' ablation tables: CCV at K = 5/10/15/20 against "
            "answer_count, MoI's permutation schemes, CORG's baselines (organize.strategy) by "
            "answer recall; about 8 CCV, 3 MoI and 6 CORG runs more per question.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """Each paper's method answering through the graph (phase B): each beside its controls."""
    from graphs.eval.datasets import load_cases
    from graphs.eval.methods import CORG, run_methods, table, write_rows
    from infra.settings import ModelSpec
    from infra.simulate.reader import CURVES, settings_from_pairs

    chosen = [s.strip() for s in strategies.split(",") if s.strip()]
    known = (*ENSEMBLE_STRATEGIES, CORG)
    if not chosen:
        raise CliError("--strategies names no strategy")
    if bad := [s for s in chosen if s not in known]:
        raise CliError(f"unknown strategy {bad[0]!r}; choose from {', '.join(known)}")
    if reader not in (None, "planted", "local"):
        raise CliError(f"unknown --reader {reader!r}; choose planted or local")
    if reader != "planted" and (reader_seed is not None or reader_curve is not None or reader_set):
        raise CliError("--reader-seed, --reader-curve and --reader-set need --reader planted")
    if reader_curve is not None and reader_curve not in CURVES:
        raise CliError(f"unknown --reader-curve {reader_curve!r}; choose {', '.join(CURVES)}")
    planted = None
    if reader == "planted":
        named = {"seed": reader_seed, "curve": reader_curve}
        pairs = [f"{k}={v}" for k, v in named.items() if v is not None] + list(reader_set or [])
        try:
            planted = settings_from_pairs(pairs)
        except ValueError as exc:
            raise CliError(f"--reader-set: {exc}") from None
    if not dataset.is_file():
        raise CliError(f"{dataset}: no such file")
    if rows is not None and not rows.parent.is_dir():
        raise CliError(f"--rows {rows}: no such directory {rows.parent}")
    cases = load_cases(dataset, limit=limit, offset=offset)
    if not cases:
        raise CliError(f"{dataset}: no usable questions (after --offset {offset})")
    if reader == "local":
        # Every role played by ModelSpec's default: provider local, the demo model.
        demo = ModelSpec().model_dump()
        roles = {"query": demo, "refine": None, "organize": None, "synthesis": None}
        settings = settings_for(models={**roles, "ensemble": [demo]})
    else:
        settings = settings_for()
    report, answered = run_methods(
        settings,
        cases,
        list(dict.fromkeys(chosen)),
        dataset=dataset.name,
        planted=planted,
        ablations=ablations,
    )
    if rows is not None:
        write_rows(rows, answered)
    if as_json:
        write_json(report)
        return
    for line in table(report):
        out.print(line, markup=False)


@eval_app.command("likelihoods")
def eval_likelihoods(
    dataset: Annotated[
        Path,
        typer.Option(
            "--dataset",
            help="NaturalQuestions-open .jsonl(.gz) with gold passages (nq-open-oracle).",
        ),
    ],
    limit: Annotated[int | None, typer.Option(help="Only N questions.")] = None,
    offset: Annotated[int, typer.Option(help="Skip the first N usable questions.")] = 0,
    passages: Annotated[
        int,
        typer.Option(
            help="Passages per question: the gold, the hard distractor, the closest irrelevant."
        ),
    ] = 5,
    orders_per_question: Annotated[
        int | None,
        typer.Option(
            "--orders-per-question",
            help="Orders scored per question: MoI's 3N random orders to fit, the rest held out "
            "(default 5N).",
        ),
    ] = None,
    observation: Annotated[
        str | None,
        typer.Option(
            help="joint: log P(passages, question) (MoI's Eq. 3); question: log P(question | "
            "passages) (default: ensemble.moi.observation)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")] = False,
) -> None:
    """MoI's position x utility model on the configured model's likelihoods, vs its parts."""
    import math

    from graphs.cli.common import err

    if limit is not None and limit < 1:
        raise CliError(f"--limit {limit}: give at least 1")
    if offset < 0:
        raise CliError(f"--offset {offset}: give 0 or more")
    if not 4 <= passages <= 20:
        raise CliError(
            f"--passages {passages}: give 4 to 20 (below 4, MoI's 3N orders are all the orders "
            "there are, none is left to hold out; a case has 20 passages)"
        )
    fitting = 3 * passages
    orders = 5 * passages if orders_per_question is None else orders_per_question
    most = min(math.factorial(passages), fitting + 1000)
    if not fitting + 2 <= orders <= most:
        raise CliError(
            f"--orders-per-question {orders}: give {fitting + 2} to {most} (the first {fitting} "
            f"are MoI's fitting orders for {passages} passages, the rest are held out)"
        )
    if observation not in (None, "joint", "question"):
        raise CliError(f"unknown --observation {observation!r}; choose joint or question")
    if not dataset.is_file():
        raise CliError(f"{dataset}: no such file")
    from graphs.eval.datasets import load_cases
    from graphs.eval.likelihoods import SCOPE, measure, table
    from infra.models import LikelihoodUnavailable, ModelPool

    cases = load_cases(dataset, limit=limit, offset=offset)
    if not cases:
        raise CliError(f"{dataset}: no usable questions (after --offset {offset})")
    if cases[0].kind != "nq":
        raise CliError(f"{dataset}: not NaturalQuestions-open (questions with a gold passage)")
    settings = settings_for()
    models = list({m.name: m for m in ModelPool(settings).role("ensemble")}.values())
    joint = (observation or settings.ensemble.moi.observation) == "joint"
    reports = []
    for model in models:
        err.print(
            f"{model.name}: {len(cases)} questions, {orders} orders + {passages} positions each"
        )
        try:
            reports.append(
                asyncio.run(
                    measure(
                        model,
                        cases,
                        passages=passages,
                        held_out=orders - fitting,
                        joint=joint,
                        first=offset + 1,
                        progress=lambda line: err.print(line, markup=False),
                    )
                )
            )
        except LikelihoodUnavailable as exc:
            raise CliError(str(exc)) from None
    result = {"dataset": dataset.name, "scope": SCOPE, "models": reports}
    if as_json:
        write_json(result)
        return
    for report in reports:
        for line in table(report):
            out.print(line, markup=False)
        out.print("")
    out.print(SCOPE, markup=False)
