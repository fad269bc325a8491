"""How the planted reader is biased: its settings, their sources, and its position curves.

See `reader.py` for how the settings are used, `calibration.py` for the published figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from lab.simulate.calibration import (
    CCV_VALID_RUNS,
    CITATION_PRECISION,
    FITTED_DISTRACTOR_STRENGTH,
    FITTED_IRRELEVANT_UTILITY,
    INTERACTION_ASSUMED,
    LIU_DEPTH,
    LOGPROB_NOISE_ASSUMED,
    OVERRIDE_ASSUMED,
    SELF_CONSISTENCY_AGREEMENT,
    liu_relative,
)

if TYPE_CHECKING:
    from lab.simulate.planted import PlantedPassage, PlantedQuestion

CURVES = ("liu", "u", "primacy", "recency", "flat")
CURVE_STRENGTH = {"liu": LIU_DEPTH, "u": 0.8, "primacy": 0.8, "recency": 0.8, "flat": 0.8}
"""A curve's strength when none is given: liu its measured depth; the others 0.8, as before."""
U_LEAN = 0.3
"""How much less the last position is read than the first under the U curve (before scaling)."""
U_PEAK = (4.0 + U_LEAN) ** 2 / 16.0
"""The largest value of 4x(1 − x) + U_LEAN·x on [0, 1], at x = (4 + U_LEAN) / 8."""


@dataclass(frozen=True)
class ReaderSettings:
    """How the planted reader is biased; recorded with every reply it serves."""

    curve: str = "liu"
    """Position curve: liu (measured, Liu et al. 2023), u, primacy, recency, or flat (none)."""
    strength: float | None = None
    """How deep the curve dips, in [0, 1): the least-read position weighs 1 − strength.
    Default: the curve's own (`CURVE_STRENGTH`; liu: 0.290, measured)."""
    seed: int = 0
    """Seed of every reading; with the prompt it fixes the passage read."""
    distractor_strength: float = FITTED_DISTRACTOR_STRENGTH
    """Utility of a hard distractor (gold = 1) unless the passage plants its own: 0.4, fitted
    with irrelevant_utility to two real models' reading diagnostics (calibration.py)."""
    irrelevant_utility: float = FITTED_IRRELEVANT_UTILITY
    """Utility of an irrelevant or unplanted passage unless the passage plants its own: 0.005,
    fitted with distractor_strength (calibration.py; tests/tools/fit_reader.py)."""
    floor: float = 1e-3
    """Least probability of any scored continuation (no log of zero)."""
    override: float = OVERRIDE_ASSUMED
    """Chance a synthesis prompt's reader ignores the decision it is told and reads itself.
    ASSUMPTION (0.1): no published measurement found; sweep it."""
    sample_agreement: float = round(SELF_CONSISTENCY_AGREEMENT, 2)
    """Chance a sample at T = 1 gives the greedy reading's answer (agreement^T at T): 0.85,
    self-consistency's agreement rate on Qwen2.5-7B (Context Bagging, Table 3: 0.8494)."""
    cite_mismatch: float = round(1.0 - CITATION_PRECISION, 3)
    """Chance a member asked to cite cites another shown passage than the one it read (and
    quotes that one): 0.255 = 1 − 74.5% citation precision (Liu, Zhang & Liang 2023)."""
    misquote: float = round(1.0 - CCV_VALID_RUNS["with_quote"] / CCV_VALID_RUNS["no_quote"], 3)
    """Chance a member asked to quote gives a quote that is not verbatim (a word dropped):
    0.169 = 1 − 4.12/4.96 valid runs with and without the quote check (CCV, Table 3)."""
    interaction: float = INTERACTION_ASSUMED
    """λ in [0, 1]: weight of the saturating term in log P(q | passages); 0 is MoI's linear
    model exactly. ASSUMPTION (0.5): no published figure."""
    logprob_noise: float = LOGPROB_NOISE_ASSUMED
    """σ (nats, >= 0) of the per-prompt noise on log P(q | passages). ASSUMPTION (0.1)."""

    def __post_init__(self) -> None:
        """Fill the curve's own strength; refuse settings outside their ranges."""
        if self.curve not in CURVES:
            raise ValueError(f"reader curve must be one of {CURVES}, got {self.curve!r}")
        if self.strength is None:
            object.__setattr__(self, "strength", CURVE_STRENGTH[self.curve])
        if not 0.0 <= self.strength < 1.0:
            raise ValueError(f"reader strength must be in [0, 1), got {self.strength}")
        if not (self.distractor_strength >= 0 and self.irrelevant_utility >= 0):
            raise ValueError("reader utilities must be >= 0")
        if not 0.0 < self.floor < 1.0 or not 0.0 <= self.override <= 1.0:
            raise ValueError("reader floor must be in (0, 1) and override in [0, 1]")
        for name in ("sample_agreement", "cite_mismatch", "misquote", "interaction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"reader {name} must be in [0, 1], got {getattr(self, name)}")
        if not 0.0 <= self.logprob_noise < math.inf:
            raise ValueError(f"reader logprob_noise must be >= 0, got {self.logprob_noise}")

    def as_dict(self) -> dict[str, Any]:
        """Return the settings as JSON-able values."""
        return asdict(self)

    def utility(self, passage: PlantedPassage, question: PlantedQuestion | None) -> float:
        """Return a passage's utility: its own, else its role's (a duplicate: its root's)."""
        if passage.utility is not None:
            return passage.utility
        if passage.role == "duplicate" and question is not None:
            return self.utility(question.passages[passage.root], question)
        if passage.role == "distractor":
            return self.distractor_strength
        if passage.role == "irrelevant":
            return self.irrelevant_utility
        return 1.0


def settings_from_pairs(pairs: Sequence[str]) -> ReaderSettings:
    """Return the reader settings that KEY=VALUE pairs name (the rest at their defaults).

    Raises ValueError, in one line naming the known keys, on an unknown key or a bad value.
    """
    known = {f.name: f for f in fields(ReaderSettings)}
    names = ", ".join(known)
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = (part.strip() for part in pair.partition("="))
        if not sep or key not in known:
            raise ValueError(f"unknown reader setting {key!r} (give KEY=VALUE; keys: {names})")
        kind = str if key == "curve" else int if key == "seed" else float
        try:
            values[key] = kind(text)
        except ValueError:
            noun = "an integer" if kind is int else "a number"
            raise ValueError(
                f"reader setting {key}: {text!r} is not {noun} (keys: {names})"
            ) from None
    try:
        return ReaderSettings(**values)
    except ValueError as exc:
        raise ValueError(f"{exc} (keys: {names})") from None


def position_curve(curve: str, strength: float, n: int) -> list[float]:
    """Return the position weights of n shown passages (before normalisation)."""
    xs = [j / (n - 1) if n > 1 else 0.0 for j in range(n)]
    if curve == "liu":
        # NOTE: the 20-document curve by relative position x, whatever n: an assumption.
        return [1.0 - strength * (1.0 - liu_relative(x)) / LIU_DEPTH for x in xs]
    if curve == "u":
        return [1.0 - strength * (4.0 * x * (1.0 - x) + U_LEAN * x) / U_PEAK for x in xs]
    if curve == "primacy":
        return [1.0 - strength * x for x in xs]
    if curve == "recency":
        return [1.0 - strength * (1.0 - x) for x in xs]
    if curve == "flat":
        return [1.0] * n
    raise ValueError(f"unknown curve {curve!r}")
