"""Fine-tune a bi-encoder or a cross-encoder with sentence-transformers' own trainers."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import infra.offline
from infra.embeddings import default_model_dir, resolve_device
from infra.heartbeat import Heartbeat
from infra.settings import CrossEncoderSettings, SnippetSettings
from infra.training.card import DEV_QUESTIONS, write_card
from infra.training.data import (
    TrainingData,
    check_inputs,
    golden_file,
    load_training,
    rerank_rows,
    retrieval_rows,
)
from infra.training.dev import (
    CrossEncoderDevEvaluator,
    FusionDevEvaluator,
    bm25_figures,
    document_groups,
)
from infra.training.options import TrainOptions
from infra.training.stop import stop_callback


def train_retriever(
    questions: Sequence[Path], corpus: Sequence[Path], output: Path, options: TrainOptions
) -> dict[str, Any]:
    """Train a bi-encoder on in-batch + BM25 hard negatives; return the card's record."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import (
        BatchSamplers,
        SentenceTransformerTrainingArguments,
    )

    check_inputs(questions, corpus, output)
    device = resolve_device(options.device, "--device")
    data = _load(questions, corpus, options)
    infra.offline.quiet_transformers()
    _seed(options.seed)
    base = options.base_model or default_model_dir()
    model = SentenceTransformer(str(base), device=device, local_files_only=True)
    # Trained on truncations (a batch pads to its longest text: 256 tokens would double the
    # cost), the model keeps its own limit for indexing and queries.
    encode_length, model.max_seq_length = model.max_seq_length, options.max_length
    rows = retrieval_rows(data, data.train, max_positives=options.max_positives, seed=options.seed)
    evaluator = FusionDevEvaluator(data) if data.dev else None
    dev: list[dict[str, Any]] = []
    if evaluator:
        dev.append({"model": "BM25", "epoch": "", "alpha": 0.0, **bm25_figures(evaluator.examples)})
        before = _strip(evaluator(model))
        dev.append({"model": f"{_label(options)} (untrained)", "epoch": 0, **before})
    return _run(
        output,
        "retriever",
        data,
        options,
        device,
        model,
        lambda tmp: SentenceTransformerTrainer(
            model=model,
            args=SentenceTransformerTrainingArguments(
                batch_sampler=BatchSamplers.NO_DUPLICATES,
                **_arguments(tmp, options, device, evaluator),
            ),
            train_dataset=Dataset.from_dict(rows),
            loss=MultipleNegativesRankingLoss(model),
            evaluator=evaluator,
        ),
        evaluator,
        dev,
        loss="MultipleNegativesRankingLoss: in-batch + one BM25 hard negative per pair",
        rows=len(rows["anchor"]),
        before_save=lambda: setattr(model, "max_seq_length", encode_length),
    )


def train_reranker(
    questions: Sequence[Path], corpus: Sequence[Path], output: Path, options: TrainOptions
) -> dict[str, Any]:
    """Train a cross-encoder on (question, gold, n BM25 negatives); return the card's record."""
    from datasets import Dataset
    from sentence_transformers.cross_encoder import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from sentence_transformers.cross_encoder.losses import MultipleNegativesRankingLoss

    check_inputs(questions, corpus, output)
    device = resolve_device(options.device, "--device")
    data = _load(questions, corpus, options)
    infra.offline.quiet_transformers()
    first_stage = "BM25"
    if options.retriever is not None:
        from infra.training.first_stage import fuse_hits

        alpha = fuse_hits(data, options.retriever, device)
        first_stage = f"BM25 + {Path(options.retriever).name} (α {alpha:g})"
    _seed(options.seed)
    base = options.base_model or default_model_dir()
    model = CrossEncoder(
        str(base),
        num_labels=1,
        max_length=options.max_length,
        device=device,
        local_files_only=True,
    )
    from infra.training.sentences import sentence_groups, sentence_rows

    make_rows = sentence_rows if options.level == "sentence" else rerank_rows
    rows = make_rows(
        data,
        data.train,
        negatives=options.negatives,
        seed=options.seed,
        max_positives=options.max_positives,
    )
    if options.level == "sentence":
        groups = sentence_groups(data, data.dev)
        dev: list[dict[str, Any]] = []
    else:
        # NOTE: without --retriever the dev head is BM25's, and the weight chosen against it is
        # too high behind a trained retriever (0.9 against 0.1-0.3 on 11B; README).
        examples = [e for e in data.dev if e.hits]  # the first-stage row and the groups: the same
        groups = document_groups(data, examples, options.dev_depth)
        dev = [{"model": first_stage, "epoch": "", **bm25_figures(examples)}] if examples else []
    if not rows["anchor"]:
        from infra.errors import UserError

        raise UserError("no training pairs could be made from these files; check the corpus")
    evaluator = CrossEncoderDevEvaluator(groups) if groups else None
    if evaluator:
        before = _strip(evaluator(model))
        dev.append({"model": f"{_label(options)} (new head)", "epoch": 0, **before})
    return _run(
        output,
        "reranker",
        data,
        options,
        device,
        model,
        lambda tmp: CrossEncoderTrainer(
            model=model,
            args=CrossEncoderTrainingArguments(**_arguments(tmp, options, device, evaluator)),
            train_dataset=Dataset.from_dict(rows),
            # One in-batch negative on top of the BM25 ones: each extra costs a forward pass.
            loss=MultipleNegativesRankingLoss(model, num_negatives=1),
            evaluator=evaluator,
        ),
        evaluator,
        dev,
        loss=f"MultipleNegativesRankingLoss (cross-encoder): gold vs {options.negatives} "
        f"{first_stage} negatives + 1 in-batch",
        rows=len(rows["anchor"]),
        after_save=(
            (lambda saved: _choose_snippets(saved, data, options, device))
            if options.level == "sentence" and data.dev
            else None
        ),
    )


def _choose_snippets(
    saved: Path, data: TrainingData, options: TrainOptions, device: str
) -> dict[str, Any]:
    """Choose snippets.documents and snippets.min_score on dev with the saved sentence scorer."""
    from infra.rerankers import SentenceTransformersReranker
    from infra.training.sentences import snippet_selection

    batch = SnippetSettings().batch_size
    scorer = SentenceTransformersReranker(saved, batch, options.max_length, device=device)
    rows = snippet_selection(data, data.dev, scorer)
    if not rows:
        return {}
    best = rows[0]
    return {
        "snippet_selection": rows,
        "chosen": {
            "snippets_documents": best["documents"],
            "snippets_min_score": best["min_score"],
            "dev_snippets_f1": best["snippets_f1"],
        },
    }


def _load(questions: Sequence[Path], corpus: Sequence[Path], options: TrainOptions) -> TrainingData:
    return load_training(
        questions,
        corpus,
        seed=options.seed,
        dev_fraction=options.dev_fraction,
        dev_max=options.dev_max,
    )


def _seed(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed)


def _arguments(tmp: Path, options: TrainOptions, device: str, evaluator: Any) -> dict[str, Any]:
    """Return the training arguments both trainers share (no dev split: the last epoch)."""
    import torch

    on_gpu = device == "cuda"
    return {
        "output_dir": str(tmp),
        "num_train_epochs": options.epochs,
        "per_device_train_batch_size": options.batch_size,
        "learning_rate": options.learning_rate,
        "warmup_steps": 0.1,  # a float: the share of steps
        "seed": options.seed,
        "data_seed": options.seed,
        "eval_strategy": "epoch" if evaluator else "no",
        "save_strategy": "epoch" if evaluator else "no",
        "save_total_limit": 1,
        "load_best_model_at_end": evaluator is not None,
        "metric_for_best_model": "eval_dev_map@10",
        "greater_is_better": True,
        "use_cpu": device == "cpu",
        "bf16": on_gpu and torch.cuda.is_bf16_supported(),
        "fp16": on_gpu and not torch.cuda.is_bf16_supported(),
        "logging_steps": 50,
        "report_to": "none",
        "disable_tqdm": False,
        "dataloader_num_workers": 0,
    }


def _run(
    output: Path,
    kind: str,
    data: TrainingData,
    options: TrainOptions,
    device: str,
    model: Any,
    make_trainer: Callable[[Path], Any],
    evaluator: Any,
    dev: list[dict[str, Any]],
    *,
    loss: str,
    rows: int,
    before_save: Callable[[], None] | None = None,
    after_save: Callable[[Path], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train in a scratch directory beside `output`, then move the finished model into place."""
    import sentence_transformers
    import torch
    import transformers

    output.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        trainer = make_trainer(scratch / "checkpoints")
        trainer.add_callback(stop_callback())
        started = time.perf_counter()
        # The trainer prints its logs on stdout, which belongs to the settings lines (or --json).
        state = trainer.state

        def describe() -> str:
            return (
                f"training the {kind}: step {state.global_step:,} of {state.max_steps:,}, "
                f"epoch {state.epoch or 0:.2f}"
            )

        with contextlib.redirect_stdout(sys.stderr), Heartbeat(describe):
            trainer.train()
        seconds = time.perf_counter() - started
        staged = scratch / "model"
        if before_save is not None:
            before_save()
        model.save_pretrained(str(staged))
        history = evaluator.history[1:] if evaluator else []
        for row in history:
            dev.append({"model": "trained", **{k: v for k, v in row.items() if k != "steps"}})
        best = max(history, key=lambda r: r["map@10"]) if history else {}
        chosen = {"epoch": best.get("epoch", options.epochs)}
        if kind == "retriever":
            chosen["alpha"] = best.get("alpha", 0.6)
        elif options.level == "document":
            chosen["weight"] = best.get("weight", CrossEncoderSettings().weight)
        record = {
            "kind": kind,
            "data": {**data.summary(), "training_rows": rows},
            "settings": {
                **{k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()},
                "base_model": str(options.base_model or default_model_dir()),
                "base_label": _label(options),
            },
            "loss": loss,
            "device": device,
            "train_seconds": round(seconds, 1),
            "dev": dev,
            "dev_columns": _columns(dev),
            "chosen": chosen,
            "library": {
                "sentence_transformers": sentence_transformers.__version__,
                "transformers": transformers.__version__,
                "torch": torch.__version__,
            },
        }
        if after_save is not None:  # chosen with the saved model, as it will be loaded
            extra = after_save(staged)
            record = {**record, **extra, "chosen": {**chosen, **extra.get("chosen", {})}}
        if output.exists():
            output.rmdir()  # checked empty before training
        # The dev questions as a golden file: settings downstream of the model (snippets'
        # selection, a fusion weight) are tuned on questions it never trained on.
        (staged / DEV_QUESTIONS).write_text(
            json.dumps(golden_file(data.dev), indent=1) + "\n", encoding="utf-8"
        )
        shutil.move(str(staged), str(output))
        record["settings_lines"] = write_card(output, kind, record)
        return record
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _label(options: TrainOptions) -> str:
    return options.base_model.name if options.base_model else "all-MiniLM-L6-v2"


def _columns(dev: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in dev:
        columns += [k for k in row if k not in ("model", "epoch", "steps") and k not in columns]
    return columns


def _strip(metrics: dict[str, float]) -> dict[str, float]:
    """Drop the trainer's `dev_` prefix for the card."""
    return {k.removeprefix("dev_"): v for k, v in metrics.items()}
