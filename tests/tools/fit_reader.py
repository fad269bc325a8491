"""Fit the planted reader's two unmeasured utilities to two published diagnostics of real models.

No paper measures how much a reader is drawn to an irrelevant passage or a hard distractor; two
papers measure what follows from them on real models: how often K = 5 greedy readings of
permuted views agree (Permute-Vote, agreement 0.72: Context Bagging Table 3, Qwen2.5-7B,
m = 12), and how many queries give three or more answers over 20 orders of the top 5 (19.4%:
Citation-Consistent Voting §4.5, Qwen3-8B, NQ). This command simulates both on `eval methods`'
NQ cases (1 gold, 1 hard distractor, 18 irrelevant passages) for a grid of
(irrelevant_utility, distractor_strength), drawing each view's reading as the reader does
(utility × the position curve), and prints how close each pair comes. Method accuracy plays no
part: the reader is fitted to how real models read, never to how quorum's methods score.

    uv run python tests/tools/fit_reader.py [--dataset FILE] [--limit 60] [--seeds 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lab.simulate.bias import ReaderSettings, position_curve  # noqa: E402
from lab.simulate.calibration import CCV_UNSTABLE, PERMUTE_VOTE_AGREEMENT  # noqa: E402
from lab.trials.datasets import load_cases  # noqa: E402
from nodes.ensemble.views import permuted_views  # noqa: E402

GRID = [(0.05, 0.7), (0.01, 0.4), (0.01, 0.7), (0.005, 0.5), (0.005, 0.4), (0.003, 0.5)]


def readings(util, answers, views, settings, rng):
    """Return the answer each view is read as: one passage drawn ∝ utility × position."""
    out = []
    for view in views:
        curve = position_curve(settings.curve, settings.strength, len(view))
        weights = [util[i] * curve[j] for j, i in enumerate(view)]
        out.append(answers[rng.choices(view, weights=weights)[0]])
    return out


def diagnostics(cases, irrelevant, distractor, seeds):
    """Return (Permute-Vote agreement at K 5, m 12; share unstable over 20 orders of 5)."""
    settings = ReaderSettings(irrelevant_utility=irrelevant, distractor_strength=distractor)
    agreement, unstable, n = [], 0, 0
    for seed in range(seeds):
        rng = random.Random(seed)
        for case in cases:
            util = [
                {"gold": 1.0, "distractor": distractor}.get(p.role, irrelevant)
                for p in case.passages
            ]
            answers = [p.role if p.role != "irrelevant" else p.pmid for p in case.passages]
            n_passages = len(case.passages)
            five = readings(
                util,
                answers,
                permuted_views(n_passages, 5, 12, rng.randrange(10**6)),
                settings,
                rng,
            )
            agreement.append(max(five.count(a) for a in five) / len(five))
            twenty = readings(
                util,
                answers,
                permuted_views(n_passages, 20, 5, rng.randrange(10**6)),
                settings,
                rng,
            )
            unstable += len(set(twenty)) >= 3
            n += 1
    return statistics.mean(agreement), unstable / n


def main() -> int:
    """Print the grid's diagnostics beside the published ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset",
        type=Path,
        default=ROOT / "tests/fixtures/eval_methods/nq_open_sample.jsonl.gz",
    )
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    cases = load_cases(args.dataset, limit=args.limit)
    print(f"published: agreement {PERMUTE_VOTE_AGREEMENT:.3f}, unstable {CCV_UNSTABLE:.3f}")
    print("irrelevant_utility  distractor_strength  agreement  unstable")
    for irrelevant, distractor in GRID:
        agreement, unstable = diagnostics(cases, irrelevant, distractor, args.seeds)
        print(f"{irrelevant:<20}{distractor:<21}{agreement:<11.3f}{unstable:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
