"""Where the planted reader departs from its greedy reading: sampling and citing.

A sampled call (temperature T > 0) keeps the greedy reading's answer with probability
`sample_agreement`^T (`calibration.keep_rate`); otherwise it reads a shown passage that gives
another answer, drawn by weight. The n-th sampled call of one view at one temperature is seeded
by n, so K identical requests (self-consistency) give a reproducible multiset of answers,
whichever request comes first; greedy calls (T = 0 or none sent) never depart.

A member asked to cite (its schema has a PMID, passage-number or quote field) cites the passage
it read, except at rate `cite_mismatch`, when it cites another shown passage, drawn by weight:
a misattribution that may still support its answer (a duplicate of the passage read). A
member asked to quote misquotes at rate `misquote`: one word of its quote outside the answer
is dropped (else a few words are added), so the quote no longer stands in the passage.
"""

from __future__ import annotations

import random

from lab.simulate.calibration import keep_rate
from lab.simulate.reader import PlantedReader, Reading, Seen


def sampled(
    reader: PlantedReader, reading: Reading, greedy: Seen, temperature: float | None
) -> tuple[Seen, str]:
    """Return the passage a call reads at this temperature, and the salt of its draws."""
    if not temperature or temperature <= 0:
        return greedy, ""
    view = [reading.question.id, *(s.pmid for s in reading.seen)]
    index = reader.next_sample([*view, float(temperature)])
    salt = f"sample {float(temperature)!r} {index}"
    rng = reader.view_rng(reading, salt)
    if rng.random() < keep_rate(reader.settings.sample_agreement, temperature):
        return greedy, salt
    others = [s for s in reading.seen if not s.keys & greedy.keys]
    return (_by_weight(others, rng) if others else greedy), salt


def cited(reader: PlantedReader, reading: Reading, read: Seen, salt: str = "") -> Seen:
    """Return the passage a member cites: the one it read, or at `cite_mismatch` another."""
    rng = reader.view_rng(reading, f"cite {salt}")
    others = [s for s in reading.seen if s.pmid != read.pmid]
    if not others or rng.random() >= reader.settings.cite_mismatch:
        return read
    return _by_weight(others, rng)


def misquoted(
    reader: PlantedReader, reading: Reading, said: str, answer: list[str], salt: str
) -> str:
    """Return the quote a member gives: verbatim, or at `misquote` one word short of it."""
    rng = reader.view_rng(reading, f"quote {salt}")
    if not said or rng.random() >= reader.settings.misquote:
        return said
    words = said.split()
    kept = {w.lower() for a in answer for w in a.split()}
    # An inner word: without its first or last word a quote would still stand in the passage.
    inner = range(1, len(words) - 1)
    droppable = [k for k in inner if words[k].lower().strip(".,;:") not in kept]
    if len(words) < 3 or not droppable:
        return f"{said} (as reported)"
    dropped = rng.choice(droppable)
    return " ".join(w for k, w in enumerate(words) if k != dropped)


def _by_weight(options: list[Seen], rng: random.Random) -> Seen:
    total = sum(s.weight for s in options)
    if total <= 0:
        return rng.choice(options)
    roll, edge = rng.random() * total, 0.0
    for seen in options:
        edge += seen.weight
        if roll < edge:
            return seen
    return options[-1]
