"""Fixtures both suites use: settings rooted in tmp_path (suite fixtures live in unit/ and
integration/; fakes and helpers in tests/support)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.settings import Settings, load_settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with every file under tmp_path and fallback search off."""
    return load_settings(home=tmp_path / "home", fallback={"enabled": False})
