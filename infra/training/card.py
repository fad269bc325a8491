"""The model card a training run leaves in its model directory, and the settings to use it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD = "README.md"
RECORD = "quorum-training.json"
DEV_QUESTIONS = "dev_questions.json"
"""The dev split's questions, a BioASQ golden file: tune downstream settings on it."""


def settings_lines(kind: str, output: Path, record: dict[str, Any]) -> list[str]:
    """Return the exact settings lines that put the trained model to use."""
    path = str(output.resolve())
    if kind == "retriever":
        return [
            f"QUORUM_EMBEDDINGS__PATH={path}",
            f"QUORUM_EMBEDDINGS__NAME={output.name}",
            "QUORUM_RERANK__FUSION=interpolate",
            f"QUORUM_RERANK__ALPHA={record['chosen']['alpha']}",
        ]
    if record["settings"]["level"] == "sentence":
        chosen = record["chosen"]
        lines = [
            f"QUORUM_SNIPPETS__SCORER_PATH={path}",
            f"QUORUM_SNIPPETS__MAX_LENGTH={record['settings']['max_length']}",
        ]
        if "snippets_documents" in chosen:  # chosen on dev (no dev split: the defaults)
            lines.append(f"QUORUM_SNIPPETS__DOCUMENTS={chosen['snippets_documents']}")
        if chosen.get("snippets_min_score") is not None:
            lines.append(f"QUORUM_SNIPPETS__MIN_SCORE={chosen['snippets_min_score']}")
        return lines
    return [
        f"QUORUM_RERANK__CROSS_ENCODER__PATH={path}",
        f"QUORUM_RERANK__CROSS_ENCODER__TOP_N={record['settings']['dev_depth']}",
        f"QUORUM_RERANK__CROSS_ENCODER__WEIGHT={record['chosen']['weight']}",
        # Scored at the length it was trained and validated at: at 512 tokens the model trained
        # at 128 lost 0.05 MAP on 11B (README).
        f"QUORUM_RERANK__CROSS_ENCODER__MAX_LENGTH={record['settings']['max_length']}",
    ]


def write_card(output: Path, kind: str, record: dict[str, Any]) -> list[str]:
    """Write README.md (the card) and quorum-training.json; return the settings lines."""
    lines = settings_lines(kind, output, record)
    record = {**record, "settings_lines": lines}
    (output / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    data, settings = record["data"], record["settings"]
    title = "bi-encoder (retriever)" if kind == "retriever" else "cross-encoder (reranker)"
    out = [
        f"# quorum {title}: {output.name}",
        "",
        f"Fine-tuned from {settings['base_label']} (`{settings['base_model']}`) by "
        f"`quorum train {kind}` with "
        f"sentence-transformers {record['library']['sentence_transformers']} "
        f"({record['loss']}).",
        "",
        "## Data",
        "",
        *(f"- {k.replace('_', ' ')}: {_value(v)}" for k, v in data.items()),
        "",
        "## Settings",
        "",
        *(f"- {k.replace('_', ' ')}: {_value(v)}" for k, v in settings.items()),
        f"- training time: {record['train_seconds']:.0f} s on {record['device']}",
        "",
        "## Dev figures",
        "",
        f"Held-out questions of the training files (never the test batches), in "
        f"`{DEV_QUESTIONS}` as a golden file: tune settings downstream of this model on them "
        "(e.g. `quorum eval snippets --questions …/dev_questions.json`).",
        "",
        "| model | epoch | " + " | ".join(record["dev_columns"]) + " |",
        "|---|---|" + "---|" * len(record["dev_columns"]),
    ]
    for row in record["dev"]:
        cells = " | ".join(_value(row.get(c, "")) for c in record["dev_columns"])
        out.append(f"| {row['model']} | {_value(row.get('epoch', ''))} | {cells} |")
    if selection := record.get("snippet_selection"):
        out += [
            "",
            "Snippets on the dev questions, chosen as finalize chooses them from the sentences "
            "of each question's top documents (training's first stage), scored by the BioASQ "
            "evaluator (mean F-measure over offsets; a gold snippet the corpus holds elsewhere "
            "than its offsets is scored where its text is); the best five settings:",
            "",
            "| documents | min score | F1 | precision | recall | per question |",
            "|---|---|---|---|---|---|",
            *(
                f"| {r['documents']} | {_value(r['min_score'])}"
                f" | {_value(r['snippets_f1'])} | {_value(r['snippets_precision'])}"
                f" | {_value(r['snippets_recall'])} | {_value(r['snippets_per_question'])} |"
                for r in selection[:5]
            ),
        ]
    out += [
        "",
        f"Chosen: {', '.join(f'{k} {_value(v)}' for k, v in record['chosen'].items())}.",
        "",
        "## Use it",
        "",
        "Environment variables (or the same keys in a settings file):",
        "",
        "```",
        *lines,
        "```",
    ]
    if kind == "retriever":
        out += [
            "",
            "Documents are embedded when indexed: with these settings, `quorum embed --index "
            "NAME` computes this model's vectors for an existing embedded index (or re-index "
            "with `quorum index CORPUS --index NAME`); the index records which model its "
            "vectors came from and refuses searches with another.",
        ]
    elif settings["level"] == "document" and not settings.get("retriever"):
        out += [
            "",
            "The weight was chosen blending with BM25's head. Behind a trained retriever the "
            "first stage is stronger and the best weight lower (on 11B: 0.1–0.3 against 0.9): "
            "choose it on the dev questions with that retriever configured, "
            f"`quorum eval retrieval --questions {output.resolve() / DEV_QUESTIONS} "
            "--cross-encoder-weights 0,0.1,0.3,0.5,0.9`.",
        ]
    (output / CARD).write_text("\n".join(out) + "\n", encoding="utf-8")
    return lines


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, float) and 0 < abs(value) < 1e-3:
        return f"{value:g}"
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
    return str(value)
