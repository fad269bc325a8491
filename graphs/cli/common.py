"""What the `quorum` commands share: consoles, the user-error type, settings with overrides."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from graphs.consoles import SafeConsole

err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
out = SafeConsole(highlight=False, soft_wrap=True)


class CliError(Exception):
    """A problem with what the user asked for: one line on stderr, exit code 2."""


LAB_PACKAGES = ("bm25s", "numba")
"""The lab's own packages: pyproject's `lab` extra, which `pip install quorum` leaves out and
`uv sync` installs with the dev group (tests/unit/test_dependencies.py keeps the two equal)."""


def lab_missing(package: str) -> CliError:
    """Return the one line for a lab command run without the lab's packages: what, and the fix."""
    return CliError(
        f"this command needs {package}, one of the lab's packages (the `lab` extra); install "
        "them with pip install 'quorum[lab]', or uv sync in a clone"
    )


def require_lab(*packages: str) -> None:
    """Refuse a lab command before it starts work when a package it needs is not installed.

    For a command whose lab imports happen late or in a child process (`bench scale`'s bm25s
    peer runs after the engines' sizes); any other lab import is caught as it fails, in
    graphs/cli `main`, with the same line.
    """
    for package in packages:
        if importlib.util.find_spec(package) is None:
            raise lab_missing(package)


def settings_for(**overrides: Any):
    """Load settings; command-line choices override fields group by group."""
    from infra.files import usable_home
    from infra.settings import load_settings
    from infra.settings.presets import overlaid

    base = load_settings()
    usable_home(base.home)  # before anything loads: a bad data directory in one line
    if not overrides:
        return base
    # Command-line choices override the environment and the config file, group by group.
    merged = {}
    for group, values in overrides.items():
        merged[group] = overlaid(getattr(base, group).model_dump(), values, group == "models")
    return load_settings(**merged)


IndexOption = Annotated[
    str | None, typer.Option("--index", help="Index to search (default: settings).")
]
BackendOption = Annotated[
    str | None, typer.Option("--backend", help="Search backend (default: settings).")
]
TypeOption = Annotated[
    str | None,
    typer.Option("--type", help="yesno, factoid, list or summary (detected when omitted)."),
]
"""The options `ask`, `chat` and `serve` share, spelled and described once."""


def backend_names() -> tuple[str, ...]:
    """Return the search backends' names: search.backend's choices, infra.search.backends' keys.

    Read from the settings, not from infra.search.backends, so a command's --help imports no engine.
    """
    from infra.settings import SearchSettings, choices

    return choices(SearchSettings, "backend")


WriterIndexOption = Annotated[
    str | None, typer.Option("--index", help="Index to write (default: settings).")
]
WriterBackendOption = Annotated[
    str | None,
    typer.Option("--backend", help=f"{' or '.join(backend_names())} (default: settings)."),
]
"""The index and engine a command that writes documents or vectors (index, embed, pubmed sync)
works on; `checked_backend` refuses a backend that is not one of them."""


def checked_backend(backend: str | None) -> str | None:
    """Return a --backend that names a search backend, or refuse it in one line."""
    names = backend_names()
    if backend is not None and backend not in names:
        raise CliError(f"unknown --backend {backend!r}; choose {' or '.join(names)}")
    return backend


def checked_type(qtype: str | None) -> str | None:
    """Return a --type that names a BioASQ question type, or refuse it in one line."""
    from infra.bioasq.types import QUESTION_TYPES

    if qtype is not None and qtype not in QUESTION_TYPES:
        raise CliError(f"unknown --type {qtype!r}; choose one of {', '.join(QUESTION_TYPES)}")
    return qtype


def search_options(index: str | None, backend: str | None) -> dict[str, dict[str, str]]:
    """Return `settings_for` overrides for the --index and --backend flags that were given."""
    search = {k: v for k, v in (("index", index), ("backend", backend)) if v is not None}
    return {"search": search} if search else {}


ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="One OpenAI-compatible endpoint for every role not set on its own in the settings, "
        "as BASE_URL#NAME, e.g. http://localhost:8080/v1#qwen2.5-7b-instruct (default: "
        "$QUORUM_MODEL, else settings).",
    ),
]
ApiKeyEnvOption = Annotated[
    str | None,
    typer.Option(
        "--api-key-env", help="Environment variable that holds --model's API key (never the key)."
    ),
]
"""One flag to a real model, shared by ask, chat, serve and bioasq run."""


def model_options(model: str | None, api_key_env: str | None) -> dict[str, dict[str, Any]]:
    """Return `settings_for` overrides that point the base roles at one endpoint (--model).

    `--model BASE_URL#NAME`, else the variable QUORUM_MODEL in the same form; `--api-key-env`
    names the variable holding the key. Nothing given: the settings' own models. The query
    and ensemble models are replaced; a role set on its own (refine, organize, synthesis,
    verify: in the settings file or QUORUM_MODELS__VERIFY) keeps its endpoint, and one left
    unset follows them as its default says.
    """
    given = model if model is not None else os.environ.get("QUORUM_MODEL") or None
    if given is None:
        if api_key_env is not None:
            raise CliError("--api-key-env goes with --model BASE_URL#NAME (or QUORUM_MODEL)")
        return {}
    where = "--model" if model is not None else "QUORUM_MODEL"
    base_url, sep, name = given.partition("#")
    if not sep or not base_url.strip() or not name.strip():
        raise CliError(
            f"{where} {given!r} is not BASE_URL#NAME, e.g. http://localhost:8080/v1#qwen2.5-7b"
        )
    spec: dict[str, Any] = {"provider": "openai", "model": name.strip(), "base_url": base_url}
    if api_key_env is not None:
        spec["api_key_env"] = api_key_env
    # NOTE: the roles left out keep the settings' value: None (the documented default, which
    # then follows these two) or the model the user chose for that role on purpose.
    return {"models": {"query": spec, "ensemble": [spec]}}


def role_notice(settings: Any) -> None:
    """List role -> endpoint on stderr once, when the roles are not all one model."""
    from graphs.runtime import role_endpoints

    if lines := role_endpoints(settings):
        err.print("models by role: " + "; ".join(lines), markup=False)


PresetOption = Annotated[
    str | None,
    typer.Option(
        "--preset",
        help="A named set of settings: shipped with quorum (papers, fast; docs/configuration.md) "
        "or a table of the config file's \\[presets], which wins on a name clash.",
    ),
]


def preset_options(name: str | None, flags: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Return `settings_for` overrides: the preset's groups, then the flags given over them.

    The user's `[presets.NAME]` is found first, then the preset shipped under that name: a
    user who names a table `papers` meant it (stderr says it stands in for the shipped one).
    """
    if name is None:
        return flags
    from infra.settings.presets import shipped_presets

    own, shipped = settings_for().presets, shipped_presets()
    if name not in own and name not in shipped:
        yours = ", ".join(sorted(own)) or "none in the settings file"
        raise CliError(
            f"unknown --preset {name!r} (shipped: {', '.join(shipped)}; yours: {yours}); "
            f"define [presets.{name}] in the settings file (QUORUM_CONFIG)"
        )
    if name in own and name in shipped:
        err.print(
            f"[dim]note: --preset {name} is the settings file's \\[presets.{name}], "
            "not the one shipped with quorum[/dim]"
        )
    from infra.settings import Settings

    groups = [g for g in Settings.model_fields if g not in ("home", "config", "presets")]
    merged: dict[str, Any] = {}
    for group, values in (own[name] if name in own else shipped[name]).items():
        if group not in groups or not isinstance(values, dict):
            raise CliError(
                f"preset {name!r}: {group!r} is not a table of a settings group "
                f"({', '.join(groups)})"
            )
        merged[group] = dict(values)
    for group, values in flags.items():
        merged[group] = {**merged.get(group, {}), **values}
    return merged


def answering_settings(
    index: str | None,
    backend: str | None,
    model: str | None,
    api_key_env: str | None,
    preset: str | None = None,
):
    """Return the settings `ask`, `chat`, `serve` and `bioasq run` answer with.

    A preset's groups first, the flags over them; an embedded index that does not exist is
    refused at once, before any model loads.
    """
    from infra.search.backends import check_index_named

    flags = search_options(index, backend) | model_options(model, api_key_env)
    settings = settings_for(**preset_options(preset, flags))
    check_index_named(settings)
    return settings


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
    """Print a flat report as aligned key/value lines (a missing measure as NO_FIGURE)."""
    from graphs.describe import NO_FIGURE

    for key, value in report.items():
        missing = value is None or (isinstance(value, float) and value != value)
        out.print(f"{key:>{width}}  {NO_FIGURE if missing else value}")


def demo_notice(settings: Any) -> None:
    """Say so when the built-in demo model answers: it proves wiring, not quality."""
    from graphs.describe import DEMO_NOTICE

    if settings.models.uses_demo_model():
        err.print(f"[dim]note: {DEMO_NOTICE}[/dim]")


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
