"""What the `quorum` commands share: consoles, the user-error type, settings with overrides."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


class CliError(Exception):
    """A problem with what the user asked for: one line on stderr, exit code 2."""


def settings_for(**overrides: Any):
    """Load settings; command-line choices override fields group by group."""
    from infra.settings import load_settings

    if not overrides:
        return load_settings()
    # Command-line choices override the environment and the config file, group by group.
    base = load_settings()
    merged = {}
    for group, values in overrides.items():
        merged[group] = {**getattr(base, group).model_dump(), **values}
    return load_settings(**merged)


def extra_files(ctx: typer.Context) -> list[Path]:
    """Return further files given after a list option (`--questions a.json b.json`)."""
    extra = [Path(arg) for arg in ctx.args]
    if unknown := [str(p) for p in extra if str(p).startswith("-")]:
        raise CliError(f"unknown option {unknown[0]}")
    return extra


def write_json(value: Any) -> None:
    """Print exactly one JSON object (or list) on stdout: what every `--json` promises."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")


def print_report(report: dict[str, Any], width: int = 22) -> None:
    """Print a flat report as aligned key/value lines."""
    for key, value in report.items():
        out.print(f"{key:>{width}}  {value}")
