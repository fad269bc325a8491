"""Unit-test fixtures: in-process fakes only (no servers, no subprocesses, no real models)."""

from __future__ import annotations

# Fixtures are found by name: importing them here is what makes them available to unit tests.
from tests.support.fixtures import embedder, index, make_context  # noqa: F401
