"""`quorum eval organize`, `ensemble`, `methods` and `likelihoods`: the methods' trials.

The lab's part of the `eval` group: graphs/cli loads this module after graphs/cli/eval.py (the
product's `eval retrieval`, `snippets`, `support`), and each command below joins that group.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli.common import CliError, out, print_report, settings_for, write_json
from graphs.cli.eval import eval_app
from infra.settings import EnsembleSettings, OrganizeSettings, choices

ORGANIZE_STRATEGIES = choices(OrganizeSettings, "strategy")
ENSEMBLE_STRATEGIES = choices(EnsembleSettings, "strategy")


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
    from graphs.runtime import build_context
    from lab.trials.organize import evaluate_organize, load_cases

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
    from graphs.runtime import build_context
    from lab.trials.ensemble import evaluate_ensemble, load_cases, table, with_models

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
            "--reader-set sample_agreement=0.9 (keys: lab/simulate/bias.py ReaderSettings).",
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
    from infra.settings import ModelSpec
    from lab.simulate.reader import CURVES, settings_from_pairs
    from lab.trials.datasets import load_cases
    from lab.trials.methods import CORG, run_methods, table, write_rows

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
    from infra.models import LikelihoodUnavailable, ModelPool
    from lab.trials.datasets import load_cases
    from lab.trials.likelihoods import SCOPE, measure, table

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
