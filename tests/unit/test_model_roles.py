"""Which model plays each role: --model keeps a role set on its own, and stderr says who judges."""

from __future__ import annotations

import json
import os

import pytest

from graphs.cli.common import model_options, settings_for
from graphs.runtime import role_endpoints

JUDGE = {"provider": "openai", "model": "judge", "base_url": "http://judge.test/v1"}
FLAG = "http://answers.test/v1#writer"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """Start every test without QUORUM_* variables from the surrounding shell."""
    for name in list(os.environ):
        if name.startswith("QUORUM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("QUORUM_HOME", str(tmp_path / "home"))


def chosen(**overrides):
    return {role: spec.model for role, spec in settings_for(**overrides).models.by_role()}


def test_model_points_the_roles_left_unset_at_one_endpoint():
    roles = chosen(**model_options(FLAG, None))
    assert set(roles.values()) == {"writer"}
    assert settings_for(**model_options(FLAG, None)).models.verify is None  # its default


def test_a_verify_role_set_in_the_environment_keeps_its_endpoint(monkeypatch):
    monkeypatch.setenv("QUORUM_MODELS__VERIFY", json.dumps(JUDGE))
    roles = chosen(**model_options(FLAG, None))
    assert roles.pop("verify") == "judge"
    assert set(roles.values()) == {"writer"}


def test_a_role_set_in_the_settings_file_keeps_its_endpoint(monkeypatch, tmp_path):
    config = tmp_path / "quorum.toml"
    config.write_text(
        '[models.synthesis]\nprovider = "openai"\nmodel = "writer2"\n'
        'base_url = "http://two.test/v1"\n'
    )
    monkeypatch.setenv("QUORUM_CONFIG", str(config))
    roles = chosen(**model_options(FLAG, None))
    assert roles["synthesis"] == "writer2" and roles["query"] == roles["ensemble"] == "writer"
    # The author is writer2 now: the flag's model is another configured model, so it judges.
    assert roles["verify"] == "writer"


def test_stderr_lists_roles_only_when_they_differ(monkeypatch):
    assert role_endpoints(settings_for(**model_options(FLAG, None))) == []
    monkeypatch.setenv("QUORUM_MODELS__VERIFY", json.dumps(JUDGE | {"api_key_env": "JUDGE_KEY"}))
    lines = role_endpoints(settings_for(**model_options(FLAG, None)))
    assert lines[-1] == "verify → http://judge.test/v1 (judge)"
    assert "query → http://answers.test/v1 (writer)" in lines
    assert len(lines) == 6  # one line a role


def test_the_listing_never_shows_credentials_in_a_url(monkeypatch):
    monkeypatch.setenv(
        "QUORUM_MODELS__VERIFY", json.dumps(JUDGE | {"base_url": "http://me:s3cret@judge.test/v1"})
    )
    lines = role_endpoints(settings_for(**model_options(FLAG, None)))
    assert "s3cret" not in " ".join(lines) and "verify → http://judge.test/v1 (judge)" in lines
