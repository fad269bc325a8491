"""Decoding a local causal LM under a JSON-schema grammar, the text it forces read at once.

Under a schema much of a structured reply is forced: `{"answer": "` before the answer,
`", "pmids": [` after it, a PMID's last digits once its first ones single it out. Decoding one
token a step still runs the whole model for each (on a CPU, ~40 ms of reading the 135M demo
model's weights for one token). Here the text the grammar forces from where the reply stands
(xgrammar's jump-forward string, as SGLang uses it) is tokenized as a draft, and the model reads
the draft in the same pass as the token before it, as speculative decoding verifies a draft
model's guesses: at each drafted position the model chooses as it would have step by step (the
grammar's mask, then greedy or sampled); the draft's tokens stand as long as they are its choices
and the first one that is not is replaced by its choice, the keys and values after it dropped.
The reply is therefore the one step-by-step decoding gives, but for rounding: a several-token
pass computes the same keys and values through other matrix kernels (the same logits to
bfloat16's rounding: tests/integration/test_local_model.py). Like any kernel's rounding, that can
tip a choice between two near-equal tokens (docs/measured.md), and a given prompt always gets
the same reply. With `jump_forward=False` the replies are `generate`'s, token for token.

Sampling follows transformers' `generate`: the grammar's mask, then temperature, top-k (50
unless the model's generation config says otherwise), top-p and min-p; a repetition penalty in
the model's generation config applies to greedy and sampled choices, as in `generate`. Other
generation-config processors (n-gram bans, bad words) are not applied: a model that needs them
is served better by an OpenAI-compatible server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Decoding:
    """One call's choices: how many tokens at most, how to pick, and under which grammar."""

    max_new_tokens: int
    temperature: float = 0.0
    """0: greedy. Above: sampled, as transformers samples."""
    grammar: Any = None
    """An xgrammar CompiledGrammar the reply must follow, or None for free text."""
    jump_forward: bool = True
    """Read a grammar's forced run of tokens in one pass (False: a token a pass, as `generate`)."""
    stop: tuple[str, ...] = ()
    """Texts that end the reply once it holds one (OpenAI's `stop`; the caller cuts the text)."""


def decode(
    model: Any, tokenizer: Any, ids: list[int], cache: Any, read: int, how: Decoding
) -> tuple[list[int], str]:
    """Generate after the prompt `ids`: the new tokens (the stop token left out), and why.

    Why they end: "stop" (the model or the grammar ended the reply, or its text now holds one of
    `how.stop`: the tokens end on the one that completed it) or "length" (the reply reached
    max_new_tokens).

    `cache` already holds the keys and values of the first `read` prompt tokens (a PromptCache's
    shared prefix); on return it holds at least the whole prompt's.
    """
    import torch

    stops = _stop_ids(model, how.grammar)
    choose = _chooser(model, how.temperature)
    matcher = bitmask = None
    if how.grammar is not None:
        import xgrammar

        matcher = xgrammar.GrammarMatcher(how.grammar)
        bitmask = xgrammar.allocate_token_bitmask(1, how.grammar.tokenizer_info.vocab_size)
    produced: list[int] = []
    pending = ids[read:]
    with torch.inference_mode():
        while True:
            draft = _draft(matcher, tokenizer, how) if how.jump_forward else []
            logits = _logits(model, pending + draft, cache, keep=len(draft) + 1)
            for row, guess in enumerate([*draft, None]):
                if matcher is not None:
                    matcher.fill_next_token_bitmask(bitmask)
                    _mask(logits[row : row + 1], bitmask)
                token = choose(ids, produced, logits[row : row + 1])
                if token != guess:
                    break
                produced.append(token)
                matcher.accept_token(token)
                if _holds_stop(tokenizer, produced, how.stop):
                    return produced, "stop"
                if len(produced) == how.max_new_tokens:
                    return produced, _ending(matcher, bitmask, stops)
            if row < len(draft):  # the model chose otherwise: forget what it read after
                cache.crop(row - len(draft))
            if token in stops:
                return produced, "stop"
            produced.append(token)
            if matcher is not None:
                matcher.accept_token(token)
            if _complete(matcher, bitmask, stops) or _holds_stop(tokenizer, produced, how.stop):
                return produced, "stop"
            if len(produced) == how.max_new_tokens:
                return produced, "length"
            pending = [token]


def _holds_stop(tokenizer: Any, produced: list[int], texts: tuple[str, ...]) -> bool:
    """Whether the reply's end holds one of `texts` (checked after each token: the last made it)."""
    if not texts:
        return False
    # A token holds at least one character (byte tokens aside: a few more cover those), so the
    # last tokens as many as the longest text's characters hold any text the last one completed.
    tail = tokenizer.decode(produced[-(max(map(len, texts)) + 4) :], skip_special_tokens=True)
    return any(text in tail for text in texts)


def _ending(matcher: Any, bitmask: Any, stops: set[int]) -> str:
    return "stop" if _complete(matcher, bitmask, stops) else "length"


def _draft(matcher: Any, tokenizer: Any, how: Decoding) -> list[int]:
    """The tokens of the text the grammar forces from here (none without a grammar)."""
    if matcher is None:
        return []
    forced = matcher.find_jump_forward_string()
    if not forced:
        return []
    return tokenizer(forced, add_special_tokens=False)["input_ids"][: how.max_new_tokens]


def _logits(model: Any, tokens: list[int], cache: Any, keep: int) -> Any:
    """Read `tokens` after what `cache` holds; return the last `keep` positions' logits."""
    import torch

    batch = torch.tensor([tokens], device=model.device)
    out = model(input_ids=batch, past_key_values=cache, use_cache=True, logits_to_keep=keep)
    return out.logits[0].to(dtype=torch.float32)


def _complete(matcher: Any, bitmask: Any, stops: set[int]) -> bool:
    """Whether the grammar now allows nothing but stopping: the reply is whole."""
    if matcher is None:
        return False
    if matcher.is_terminated():
        return True
    matcher.fill_next_token_bitmask(bitmask)
    return _single(bitmask) in stops


def _single(bitmask: Any) -> int | None:
    """The one token a bitmask allows, or None when it allows several (or none)."""
    words = bitmask[0].nonzero()
    if words.numel() != 1:
        return None
    index = int(words[0, 0])
    word = int(bitmask[0, index]) & 0xFFFFFFFF
    if word & (word - 1):
        return None
    return index * 32 + word.bit_length() - 1


def _mask(logits: Any, bitmask: Any) -> None:
    import xgrammar

    vocab = logits.shape[-1]
    xgrammar.apply_token_bitmask_inplace(logits, bitmask.to(logits.device), vocab_size=vocab)


def _stop_ids(model: Any, grammar: Any) -> set[int]:
    eos = model.generation_config.eos_token_id
    stops = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if grammar is not None:
        stops |= set(grammar.tokenizer_info.stop_token_ids)
    return stops


def _chooser(model: Any, temperature: float) -> Any:
    """Return `choose(prompt, produced, logits) -> token`: greedy at 0, else sampled."""
    import torch
    from transformers import (
        LogitsProcessorList,
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    config = model.generation_config
    steps = LogitsProcessorList()
    if config.repetition_penalty not in (None, 1.0):
        steps.append(RepetitionPenaltyLogitsProcessor(config.repetition_penalty))
    if temperature > 0:
        steps.append(TemperatureLogitsWarper(temperature))
        steps.append(TopKLogitsWarper(config.top_k if config.top_k is not None else 50))
        if config.top_p not in (None, 1.0):
            steps.append(TopPLogitsWarper(config.top_p))
        if config.min_p is not None:
            steps.append(MinPLogitsWarper(config.min_p))

    def choose(prompt: list[int], produced: list[int], logits: Any) -> int:
        if steps:  # only these read the tokens so far (the repetition penalty)
            logits = steps(torch.tensor([prompt + produced], device=logits.device), logits)
        if temperature <= 0:
            return int(torch.argmax(logits, dim=-1)[0])
        return int(torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1)[0, 0])

    return choose
