"""The presets shipped in the package: `papers` is the papers' defaults table, `fast` is cheap."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphs.cli import app
from graphs.cli.common import CliError, preset_options, settings_for
from infra.settings import load_settings
from infra.settings.presets import shipped_presets
from tests.unit.test_paper_defaults import DEFAULTS

ROOT = Path(__file__).resolve().parents[2]


def leaves(table: dict, prefix: str = "") -> dict[str, object]:
    """Return a nested table's values by dotted path."""
    found = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        found |= leaves(value, f"{path}.") if isinstance(value, dict) else {path: value}
    return found


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No QUORUM_* variable, no settings file: the shipped presets alone."""
    for name in list(os.environ):
        if name.startswith("QUORUM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("QUORUM_HOME", str(tmp_path / "home"))
    return tmp_path


def test_at_least_papers_and_fast_ship_and_each_is_valid_settings():
    shipped = shipped_presets()
    assert {"papers", "fast"} <= set(shipped)
    for name, groups in shipped.items():
        load_settings(**groups)  # a preset that names no setting fails here, not at a user's
        text = (ROOT / "infra" / "settings" / "presets" / f"{name}.toml").read_text()
        assert text.startswith(f"# `--preset {name}`: "), "each file says what it changes"
        assert "Cost: docs/configuration.md" in text
        doc = (ROOT / "docs" / "configuration.md").read_text()
        assert f"`--preset {name}`" in doc, f"docs/configuration.md does not document {name}"


def test_papers_is_every_row_of_the_papers_defaults_table_the_verifier_on_and_corg():
    papers = leaves(shipped_presets()["papers"])
    followed = {
        row["setting"]: row["value"] for row in DEFAULTS if not row["what"].startswith("deviates: ")
    }
    assert {path: json.loads(value) for path, value in followed.items()} == {
        path: value for path, value in papers.items() if path in followed
    }
    # Beyond the table: CORG whatever the model, its groups answered by the ensemble strategy
    # (so every method runs), and every answer verified.
    extra = {path: value for path, value in papers.items() if path not in followed}
    assert extra == {
        "organize.strategy": "corg",
        "organize.corg_answers": "ensemble",
        "verify.enabled": "on",
    }


def test_fast_is_one_member_no_corg_no_verifier():
    fast = load_settings(**shipped_presets()["fast"])
    assert fast.ensemble.strategy == "single"  # one greedy call of the top m per model
    assert fast.organize.strategy == "dedupe" and fast.verify.enabled == "off"


def test_the_help_names_the_shipped_presets():
    shown = CliRunner().invoke(app, ["ask", "--help"]).output
    words = " ".join(shown.replace("│", " ").split())
    assert f"shipped with quorum ({', '.join(sorted(shipped_presets(), reverse=True))};" in words


def test_a_preset_pins_its_values_over_the_users_and_keeps_the_rest(isolated, monkeypatch):
    monkeypatch.setenv("QUORUM_ENSEMBLE__COBAG__MEMBERS", "3")
    monkeypatch.setenv("QUORUM_ENSEMBLE__STRATEGY", "ccv")
    monkeypatch.setenv("QUORUM_ENSEMBLE__MOI__PREFIX_LENGTH", "4")
    chosen = settings_for(**preset_options("papers", {}))
    assert chosen.ensemble.cobag.members == 5  # the paper's K, not the user's 3
    assert chosen.ensemble.strategy == "ccv"  # the strategy stays the user's
    assert chosen.ensemble.moi.prefix_length == 4  # a nested setting the preset leaves alone
    assert chosen.organize.strategy == "corg" and chosen.verify.enabled == "on"
    # Negative control: without the preset the user's values stand.
    plain = settings_for(**preset_options(None, {}))
    assert plain.ensemble.cobag.members == 3 and plain.organize.strategy == "auto"


def test_the_users_preset_wins_a_name_clash_and_says_so(isolated, monkeypatch, capsys):
    config = isolated / "quorum.toml"
    config.write_text('[presets.fast.ensemble]\nstrategy = "permute_vote"\n')
    monkeypatch.setenv("QUORUM_CONFIG", str(config))
    chosen = settings_for(**preset_options("fast", {}))
    assert chosen.ensemble.strategy == "permute_vote" and chosen.verify.enabled == "auto"
    assert "is the settings file's [presets.fast], not the one shipped" in capsys.readouterr().err
    with pytest.raises(
        CliError, match=r"unknown --preset 'quick' \(shipped: fast, papers; yours: fast\)"
    ):
        preset_options("quick", {})


def test_flags_given_beside_a_preset_win(isolated):
    flags = {"search": {"index": "other"}}
    assert settings_for(**preset_options("papers", flags)).search.index == "other"
    assert settings_for(**preset_options("papers", flags)).search.min_hits == 5


def test_the_wheel_takes_the_presets_with_the_package():
    # hatchling puts every file under a wheel package's folder into the wheel (checked by hand
    # with `uv build --wheel`: infra/settings/presets/*.toml are in it); nothing excludes them.
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    target = wheel["targets"]["wheel"]
    assert "infra" in target["packages"]
    assert not {"exclude", "only-include", "artifacts"} & (set(target) | set(wheel))
