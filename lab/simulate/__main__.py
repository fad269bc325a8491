"""Serve the simulated OpenAI-compatible endpoint until interrupted.

    python -m lab.simulate [--port 8000] [--latency 0]
        [--planted FILE --reader-curve liu --reader-strength S --reader-seed 0
         --distractor-strength 0.7 --irrelevant-utility 0.05 --reader-floor 0.001
         --reader-override 0.1 --reader-set KEY=VALUE …]

With `--planted` it is the reader with planted biases (see `reader.py`); point a model spec
at the printed base URL (provider "openai", `prompt_logprobs` on for MoI).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import fields

from lab.simulate.planted import PlantError
from lab.simulate.reader import CURVES, ReaderSettings, settings_from_pairs
from lab.simulate.server import SimulatedEndpoint


def parser() -> argparse.ArgumentParser:
    """Return the command line's parser."""
    defaults = ReaderSettings()
    cli = argparse.ArgumentParser(
        prog="python -m lab.simulate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_argument("--host", default="127.0.0.1")
    cli.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    cli.add_argument("--latency", type=float, default=0.0, help="seconds each request sleeps")
    cli.add_argument("--planted", metavar="FILE", help="plant file (JSON or JSONL)")
    reader = cli.add_argument_group("planted reader (with --planted; defaults: ReaderSettings)")
    reader.add_argument("--reader-curve", choices=CURVES, help=f"default {defaults.curve}")
    reader.add_argument("--reader-strength", type=float, help="depth of the curve")
    reader.add_argument("--reader-seed", type=int)
    reader.add_argument(
        "--distractor-strength", type=float, help="utility of a hard distractor (gold = 1)"
    )
    reader.add_argument("--irrelevant-utility", type=float)
    reader.add_argument("--reader-floor", type=float, help="least continuation probability")
    reader.add_argument(
        "--reader-override", type=float, help="chance synthesis ignores the decision it is told"
    )
    reader.add_argument(
        "--reader-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"any reader setting (repeatable): {', '.join(f.name for f in fields(defaults))}",
    )
    return cli


FLAGS = {
    "reader_curve": "curve",
    "reader_strength": "strength",
    "reader_seed": "seed",
    "distractor_strength": "distractor_strength",
    "irrelevant_utility": "irrelevant_utility",
    "reader_floor": "floor",
    "reader_override": "override",
}
"""The named flags and the reader setting each one sets."""


def settings_from(args: argparse.Namespace) -> ReaderSettings:
    """Return the reader settings the parsed arguments name (--reader-set last)."""
    named = [f"{key}={getattr(args, flag)}" for flag, key in FLAGS.items()]
    given = [pair for pair in named if not pair.endswith("=None")]
    return settings_from_pairs([*given, *args.reader_set])


def main(argv: Sequence[str] | None = None, *, stop: threading.Event | None = None) -> int:
    """Serve until interrupted (or until `stop` is set); return the exit status."""
    args = parser().parse_args(argv)
    try:
        reader = settings_from(args) if args.planted else None
        endpoint = SimulatedEndpoint(
            args.latency, host=args.host, port=args.port, planted=args.planted, reader=reader
        )
    except (PlantError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with endpoint:
        described = endpoint.reader.describe() if endpoint.reader else None
        print(json.dumps({"base_url": endpoint.base_url, "reader": described}), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            (stop or threading.Event()).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
