"""The planted reader as the strategy checks pin it: exact readings, MoI's linear likelihoods."""

from __future__ import annotations

from typing import Any

from lab.simulate.reader import ReaderSettings

EXACT_READER: dict[str, Any] = {
    "curve": "u",
    "strength": 0.8,
    "seed": 0,
    "distractor_strength": 0.7,
    "irrelevant_utility": 0.05,
    "override": 0.0,
    "sample_agreement": 1.0,
    "cite_mismatch": 0.0,
    "misquote": 0.0,
    "interaction": 0.0,
    "logprob_noise": 0.0,
}
"""Every reader field a strategy check relies on, pinned: the calibrated defaults
(lab/simulate/calibration.py) add citation mistakes, sampling drift, overrides, an
interaction term and noise on log-likelihoods, which checks of exact readings pin off."""


def exact_reader(**changes: Any) -> ReaderSettings:
    """Return the exact reader with these fields changed."""
    return ReaderSettings(**(EXACT_READER | changes))
