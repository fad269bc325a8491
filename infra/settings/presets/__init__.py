"""Named presets shipped with quorum, as PaperQA2 ships its named settings: one TOML file each.

A preset is a table of settings groups, the same shape as a `[presets.NAME]` table of the
user's settings file; `--preset NAME` lays it over the settings (graphs/cli/common.py
`preset_options`). What each one changes, and what it costs: docs/configuration.md.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any


def shipped_presets() -> dict[str, dict[str, Any]]:
    """Return every preset shipped in this package by name (its file's stem), sorted."""
    found = {}
    for entry in resources.files(__name__).iterdir():
        if entry.name.endswith(".toml"):
            found[entry.name.removesuffix(".toml")] = tomllib.loads(entry.read_text("utf-8"))
    return dict(sorted(found.items()))


def overlaid(base: dict[str, Any], over: dict[str, Any], whole: bool = False) -> dict[str, Any]:
    """Return `over` laid on `base`: tables merged key by key, any other value replaced.

    With `whole` a table given replaces the one below it whole: a model spec laid key by key
    over another would keep half of a local spec under an endpoint's.
    """
    laid = dict(base)
    for key, value in over.items():
        below = base.get(key)
        nested = isinstance(value, dict) and isinstance(below, dict) and not whole
        laid[key] = overlaid(below, value) if nested else value
    return laid
