"""`quorum train …`: fine-tune the retriever and the reranker on BioASQ golden files."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from graphs.cli.common import CliError, err, out, write_json
from infra.training.options import TrainOptions

DEFAULT = TrainOptions()
"""What a run gets unless told: the options' own defaults, stated once there."""
RERANKER_BATCH = 8
"""The reranker's rows per step: a (question, passage) pair is longer than a retriever row."""
DOCUMENT_POSITIVES = 1
"""The reranker's gold rows per question at the document level (sentences: the default)."""

train_app = typer.Typer(
    no_args_is_help=True, help="Fine-tune quorum's retriever or reranker on golden files."
)

QuestionsOption = Annotated[
    list[Path],
    typer.Option("--questions", help="BioASQ golden JSON files (--questions A.json B.json …)."),
]
CorpusOption = Annotated[
    list[Path],
    typer.Option("--corpus", help="Corpus .jsonl(.gz) files holding their documents."),
]
OutputOption = Annotated[
    Path, typer.Option("--output", help="New model directory (must not exist or be empty).")
]
EpochsOption = Annotated[
    int, typer.Option("--epochs", min=1, help="Epochs; the dev split keeps the best one.")
]
DeviceOption = Annotated[
    str, typer.Option("--device", help="auto (GPU when present), cpu, cuda or mps.")
]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the split, sampling and init.")]
BatchOption = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        min=2,
        help=f"Rows per step (default: {DEFAULT.batch_size} / {RERANKER_BATCH}).",
    ),
]
BaseOption = Annotated[
    Path | None,
    typer.Option("--base", help="Starting model directory (default: all-MiniLM-L6-v2)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print exactly one JSON object.")]
EXTRA = {"allow_extra_args": True}


@train_app.command("retriever", context_settings=EXTRA)
def train_retriever(
    ctx: typer.Context,
    questions: QuestionsOption,
    corpus: CorpusOption,
    output: OutputOption,
    epochs: EpochsOption = DEFAULT.epochs,
    device: DeviceOption = DEFAULT.device,
    seed: SeedOption = DEFAULT.seed,
    batch_size: BatchOption = None,
    max_positives: Annotated[
        int, typer.Option("--max-positives", min=1, help="Gold documents used per question.")
    ] = DEFAULT.max_positives,
    base: BaseOption = None,
    as_json: JsonOption = False,
) -> None:
    """Fine-tune the bi-encoder (in-batch + BM25 hard negatives); print the settings to use it."""
    from infra.training.trainers import train_retriever as run

    questions, corpus = checked_inputs(ctx, questions, corpus, output)
    options = TrainOptions(
        epochs=epochs,
        device=device_choice(device),
        seed=seed,
        batch_size=batch_size or DEFAULT.batch_size,
        max_positives=max_positives,
        base_model=base_model(base),
    )
    _report(run(questions, corpus, output, options), output, as_json)


@train_app.command("reranker", context_settings=EXTRA)
def train_reranker(
    ctx: typer.Context,
    questions: QuestionsOption,
    corpus: CorpusOption,
    output: OutputOption,
    epochs: EpochsOption = DEFAULT.epochs,
    device: DeviceOption = DEFAULT.device,
    level: Annotated[
        str,
        typer.Option("--level", help="document: (question, abstract); sentence: snippets."),
    ] = DEFAULT.level,
    seed: SeedOption = DEFAULT.seed,
    batch_size: BatchOption = None,
    negatives: Annotated[
        int, typer.Option("--negatives", min=1, help="BM25 negatives per question.")
    ] = DEFAULT.negatives,
    max_positives: Annotated[
        int | None,
        typer.Option(
            "--max-positives",
            min=1,
            help=f"Rows per question: gold documents (default {DOCUMENT_POSITIVES}) or gold "
            f"sentences (default {DEFAULT.max_positives}).",
        ),
    ] = None,
    base: BaseOption = None,
    retriever: Annotated[
        Path | None,
        typer.Option(
            "--retriever",
            help="A `train retriever` output: negatives and the dev head come from BM25 fused "
            "with it, the first stage the reranker will follow.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Fine-tune a cross-encoder on (question, gold, BM25 negatives); print the settings."""
    from infra.training.trainers import train_reranker as run

    if level not in ("document", "sentence"):
        raise CliError(f"unknown --level {level!r}; choose document or sentence")
    questions, corpus = checked_inputs(ctx, questions, corpus, output)
    if retriever is not None:
        from infra.training.first_stage import retriever_alpha

        retriever_alpha(retriever)  # one line now, not after the corpus is read
    options = TrainOptions(
        epochs=epochs,
        device=device_choice(device),
        seed=seed,
        batch_size=batch_size or RERANKER_BATCH,
        negatives=negatives,
        max_positives=max_positives
        or (DEFAULT.max_positives if level == "sentence" else DOCUMENT_POSITIVES),
        level=level,  # type: ignore[arg-type]
        base_model=base_model(base),
        retriever=retriever,
    )
    _report(run(questions, corpus, output, options), output, as_json)


def checked_inputs(
    ctx: typer.Context, questions: list[Path], corpus: list[Path], output: Path | None
):
    """Return the golden and corpus files, checked before any model library loads.

    From here on SIGTERM (a scheduler's stop, `kill`) exits like Ctrl-C: the scratch directory
    the model trains in is removed on the way out instead of being left hidden beside --output.
    """
    from infra.training.data import check_inputs, read_golden

    signal.signal(signal.SIGTERM, _terminated)

    questions, corpus = _files(ctx, questions, corpus)
    check_inputs(questions, corpus, output)
    read_golden(questions)
    return questions, corpus


def _terminated(signum: int, frame: object) -> None:
    from infra.training.stop import request_stop

    request_stop(128 + signum)  # raised again from the training loop should this one be lost
    err.print("terminated; the unfinished model was removed")
    raise SystemExit(128 + signum)


def _files(ctx: typer.Context, questions: list[Path], corpus: list[Path]):
    """Sort files given after a list option by kind: .json golden files, .jsonl(.gz) corpora."""
    questions, corpus = list(questions), list(corpus)
    for arg in ctx.args:
        if arg.startswith("-"):
            raise CliError(f"unknown option {arg}")
        path = Path(arg)
        if path.suffix == ".json":
            questions.append(path)
        elif path.name.endswith((".jsonl", ".jsonl.gz")):
            corpus.append(path)
        else:
            raise CliError(
                f"{arg}: is it a golden file (.json) or a corpus (.jsonl)? repeat "
                "--questions or --corpus before it"
            )
    return questions, corpus


def device_choice(device: str) -> str:
    """Return --device when it names a device quorum knows."""
    if device not in ("auto", "cpu", "cuda", "mps"):
        raise CliError(f"unknown --device {device!r}; choose auto, cpu, cuda or mps")
    return device


def base_model(base: Path | None) -> Path | None:
    """Return --base when it holds a model (config.json), None when not given."""
    if base is not None and not (base / "config.json").is_file():
        raise CliError(f"{base}: no model there (config.json missing); pass a model directory")
    return base


def _report(record: dict, output: Path, as_json: bool) -> None:
    if as_json:
        write_json({"output": str(output), **record})
        return
    err.print(
        f"trained in {record['train_seconds']:.0f} s on {record['device']}; card: "
        f"{output / 'README.md'}"
    )
    for row in record["dev"]:
        figures = ", ".join(f"{k} {row[k]}" for k in record["dev_columns"] if k in row)
        err.print(f"  dev {row['model']} (epoch {row.get('epoch', '')}): {figures}")
    err.print("settings to use it:")
    for line in record["settings_lines"]:
        out.print(line)
