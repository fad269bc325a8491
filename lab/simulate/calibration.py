"""Published measurements of real models that the planted reader's defaults come from.

Each figure names its paper, table and setting. The reader is calibrated to these, never to
how well quorum's own methods score against it.
"""

from __future__ import annotations

import math

LIU_POSITIONS = (1, 5, 10, 15, 20)
"""1-based positions of the answer-bearing document among 20 in LIU_ACCURACY."""
LIU_ACCURACY = (75.8, 57.2, 53.8, 55.4, 63.2)
"""Accuracy (%) of gpt-3.5-turbo-0613 on NQ-open multi-document QA with 20 documents, by the
gold document's position. SEE: Liu et al. 2023, "Lost in the Middle: How Language Models Use
Long Contexts" (TACL 2024; arXiv 2307.03172v3, Appendix Table 6).
NOTE: read from independent transcriptions of that table found by search (several agree to the
digit); the paper's own table was not opened here."""
LIU_CLOSED_BOOK = 56.1
"""The same model with no document (Liu et al. 2023, Table 1): above its mid-context accuracy."""
LIU_ORACLE = 88.3
"""The same model with only the gold document (Liu et al. 2023, Table 1)."""

SELF_CONSISTENCY_AGREEMENT = 0.8494
"""Agreement rate of K = 5 samples of one view at T = 1.0 (Qwen2.5-7B-Instruct, MuSiQue noisy
split, m = 12). SEE: Context Bagging, Table 3 (wrong-answer concentration 0.8239; Permute-Vote's
agreement over orders 0.7199). The paper does not define the rate; read here as the mean share
of the K samples that give the majority answer."""

CITATION_PRECISION = 0.745
"""Share of citations that support their associated sentence, averaged over Bing Chat,
NeevaAI, perplexity.ai and YouChat. SEE: Liu, Zhang & Liang 2023, "Evaluating Verifiability in
Generative Search Engines" (arXiv 2304.09848, abstract). Commercial search engines, not a 7B
reader on shown passages: the nearest published rate found."""

CCV_VALID_RUNS = {"with_quote": 4.12, "no_quote": 4.96}
"""Evidence-valid runs of 5 per query (Qwen3-8B greedy, NQ, top-5): with a verbatim quote
required, and with valid document numbers only. SEE: Citation-Consistent Voting, Table 3.
Of the runs citing a valid document, 1 − 4.12/4.96 = 0.169 fail the quote check: `misquote`."""

PERMUTE_VOTE_AGREEMENT = 0.7199
"""Agreement of K = 5 greedy readings over orders (Context Bagging, Table 3); not a default."""
CCV_UNSTABLE = 0.194
"""Share of queries with >= 3 unique answers across permutations (Citation-Consistent Voting,
§4.5); not a default."""

FITTED_IRRELEVANT_UTILITY = 0.005
FITTED_DISTRACTOR_STRENGTH = 0.4
"""The two utilities no paper measures, fitted to the two diagnostics above: on `eval methods`'
NQ cases (1 gold, 1 hard distractor, 18 irrelevant) they give Permute-Vote agreement 0.730
(published 0.720) and 0.198 of queries unstable (published 0.194); the earlier 0.05 and 0.7
gave 0.554 and 0.813, far more scatter than real models show. Regenerate the grid with
`uv run python tests/tools/fit_reader.py`. Fitted to how real models read, never to how any
method scores; the two figures come from other data (MuSiQue, NQ top-5) and other models
(Qwen2.5-7B, Qwen3-8B), so the fit is a calibration of scale, not a reproduction."""

OVERRIDE_ASSUMED = 0.1
"""ASSUMPTION, no published measurement found: how often a synthesizer told an ensemble's
decision answers from its own reading instead. Sweep it with --reader-set override=…"""
INTERACTION_ASSUMED = 0.5
"""ASSUMPTION: weight of the saturating (log-sum-exp) term in log P(q | passages)."""
LOGPROB_NOISE_ASSUMED = 0.1
"""ASSUMPTION: standard deviation (nats) of the per-prompt noise on log P(q | passages)."""


def liu_relative(x: float) -> float:
    """Return Liu et al.'s accuracy at relative position x in [0, 1] over the best position's.

    Positions 1, 5, 10, 15, 20 of 20 sit at x = (p − 1) / 19; between them the accuracy is
    interpolated linearly. Values: 1 at the first position, 0.710 at the tenth (the least).
    """
    xs = [(p - 1) / (LIU_POSITIONS[-1] - 1) for p in LIU_POSITIONS]
    best = max(LIU_ACCURACY)
    x = min(1.0, max(0.0, x))
    for k in range(1, len(xs)):
        if x <= xs[k]:
            t = (x - xs[k - 1]) / (xs[k] - xs[k - 1])
            low, high = LIU_ACCURACY[k - 1], LIU_ACCURACY[k]
            return (low + t * (high - low)) / best
    return LIU_ACCURACY[-1] / best


LIU_DEPTH = 1.0 - min(LIU_ACCURACY) / max(LIU_ACCURACY)
"""How deep the measured curve dips as a share of the best accuracy (0.290): the `liu` curve's
default strength, at which its weights are exactly the measured relative accuracies.

NOTE: accuracy becomes reading weight as accuracy over the best position's. The other reading,
excess over closed-book accuracy (how much the passage adds to what the model knows), would put
the middle below zero (53.8 < 56.1), i.e. a passage there is never read: an upper bound on the
dip. The ratio keeps the model's own knowledge in and so is a lower bound; it needs no clamping.
Sweep `strength` (0 ≤ s < 1) to move between them."""


def keep_rate(agreement: float, temperature: float) -> float:
    """Return the chance a sample at this temperature gives the greedy reading's answer.

    The rule: agreement^T. Each unit of temperature keeps the greedy answer with probability
    `agreement` (measured at T = 1); T = 0 always keeps it, and the rate falls smoothly with T
    (T = 2: 0.72 at the default). Only T = 1 is measured; the scaling is an assumption.
    """
    if temperature <= 0:
        return 1.0
    return math.exp(temperature * math.log(agreement)) if agreement > 0 else 0.0
