"""Serve the simulated OpenAI-compatible endpoint until interrupted.

    python -m infra.simulate [--port 8000] [--latency 0]
        [--planted FILE --reader-curve u --reader-strength 0.8 --reader-seed 0
         --distractor-strength 0.7 --irrelevant-utility 0.05 --reader-floor 0.001
         --reader-override 0]

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

from infra.simulate.planted import PlantError
from infra.simulate.reader import CURVES, ReaderSettings
from infra.simulate.server import SimulatedEndpoint


def parser() -> argparse.ArgumentParser:
    """Return the command line's parser."""
    defaults = ReaderSettings()
    cli = argparse.ArgumentParser(
        prog="python -m infra.simulate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_argument("--host", default="127.0.0.1")
    cli.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    cli.add_argument("--latency", type=float, default=0.0, help="seconds each request sleeps")
    cli.add_argument("--planted", metavar="FILE", help="plant file (JSON or JSONL)")
    reader = cli.add_argument_group("planted reader (with --planted)")
    reader.add_argument("--reader-curve", choices=CURVES, default=defaults.curve)
    reader.add_argument(
        "--reader-strength", type=float, default=defaults.strength, help="depth of the curve"
    )
    reader.add_argument("--reader-seed", type=int, default=defaults.seed)
    reader.add_argument(
        "--distractor-strength",
        type=float,
        default=defaults.distractor_strength,
        help="utility of a hard distractor (gold = 1)",
    )
    reader.add_argument("--irrelevant-utility", type=float, default=defaults.irrelevant_utility)
    reader.add_argument(
        "--reader-floor", type=float, default=defaults.floor, help="least continuation probability"
    )
    reader.add_argument(
        "--reader-override",
        type=float,
        default=defaults.override,
        help="chance synthesis ignores the decision it is told",
    )
    return cli


def settings_from(args: argparse.Namespace) -> ReaderSettings:
    """Return the reader settings the parsed arguments name."""
    return ReaderSettings(
        curve=args.reader_curve,
        strength=args.reader_strength,
        seed=args.reader_seed,
        distractor_strength=args.distractor_strength,
        irrelevant_utility=args.irrelevant_utility,
        floor=args.reader_floor,
        override=args.reader_override,
    )


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
