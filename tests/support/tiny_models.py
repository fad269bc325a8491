"""Tiny models built in tests: BERTs (2 layers, hidden 32, a WordPiece vocab written here) and a
causal Llama on a tokenizer given."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

WORDS = [
    "the",
    "of",
    "and",
    "in",
    "a",
    "to",
    "is",
    "with",
    "for",
    "by",
    "on",
    "are",
    "as",
    "was",
    "that",
    "be",
    "or",
    "from",
    "protein",
    "cell",
    "gene",
    "disease",
    "cancer",
    "patients",
    "treatment",
    "mutation",
    "syndrome",
    "drug",
    "receptor",
    "expression",
    "human",
    "associated",
    "which",
    "what",
    "does",
    "is",
    "are",
    "role",
]


def write_tiny_bert(path: Path, seed: int = 0) -> Path:
    """Save a randomly initialised 2-layer BERT (hidden 32) and its tokenizer at `path`."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    chars = string.ascii_lowercase + string.digits
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.punctuation, *chars]
    vocab += [f"##{c}" for c in chars] + [w for w in dict.fromkeys(WORDS) if w not in vocab]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), model_max_length=64)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def write_tiny_sentence_transformer(path: Path, seed: int = 0, dim: int | None = None) -> Path:
    """Save a tiny sentence-transformers model (mean pooling, optional Dense to `dim`)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense

    bert = write_tiny_bert(path.with_name(path.name + "-bert"), seed)
    model = SentenceTransformer(str(bert), device="cpu")
    if dim is not None:
        torch.manual_seed(seed)
        model.append(Dense(in_features=32, out_features=dim))
    model.save(str(path))
    assert json.loads((path / "modules.json").read_text())  # a real sentence-transformers dir
    return path


def write_tiny_cross_encoder(path: Path, seed: int = 0) -> Path:
    """Save a tiny sentence-transformers CrossEncoder (one relevance score per pair)."""
    from sentence_transformers import CrossEncoder

    bert = write_tiny_bert(path.with_name(path.name + "-bert"), seed)
    CrossEncoder(str(bert), num_labels=1, device="cpu").save(str(path))
    assert (path / "config.json").exists()
    return path


def write_tiny_llama(path: Path, tokenizer_dir: Path, seed: int = 0, **generation: Any) -> Path:
    """Save a randomly initialised 2-layer Llama (hidden 64, grouped-query attention) at `path`.

    Its tokenizer is the one in `tokenizer_dir` (a chat template the local model needs);
    `generation` becomes its generation_config.json (what a user's model may ship with).
    """
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    if generation:
        GenerationConfig(**generation).save_pretrained(path)
    return path
