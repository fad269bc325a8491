"""The fixture both suites use: settings rooted in tmp_path (the rest: unit/, integration/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.settings import Settings, load_settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with every file under tmp_path and fallback search off."""
    return load_settings(home=tmp_path / "home", fallback={"enabled": False})
