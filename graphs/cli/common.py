"""What the `quorum` commands share: consoles, the user-error type, settings with overrides."""

from __future__ import annotations

import json
import os
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


def demo_notice(settings: Any) -> None:
    """Say so when the built-in demo model answers: it proves wiring, not quality."""
    if any(spec.provider == "local" and spec.path is None for _, spec in settings.models.by_role()):
        err.print(
            "[dim]note: answering with the built-in SmolLM2-135M demo model, which proves the "
            "pipeline's "
            "wiring, not answer quality. Point quorum at a real model: see README, 'Models'.[/dim]"
        )


def fail(message: str, code: int) -> None:
    """Print one error line on stderr and leave with `code`."""
    line = " ".join(message.split())  # one line, whatever the message held
    sys.stderr.write(f"quorum: error: {line}\n")
    exit_now(code)


def exit_now(code: int) -> None:
    """Leave now, with `code`, skipping interpreter teardown."""
    # NOTE: tearing down torch and sentence-transformers at interpreter exit takes ~2 s on
    # 2 cores; everything quorum writes is closed by now, so leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
