"""What a fault drill watches and does: the batch journal as it grows, and the search outage."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTAGE_S = 1.0
"""How long the embedded index is away during the outage."""


@dataclass
class Journal:
    """The batch journal as the bench watches it: records, and when each line was first seen."""

    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    seen: list[tuple[float, int]] = field(default_factory=list)
    """(time first seen, run number) per record line."""

    def poll(self, run: int) -> None:
        """Read the complete lines written since the last poll."""
        if not self.path.exists():
            return
        text = self.path.read_text(encoding="utf-8")
        lines = text[: text.rfind("\n") + 1].splitlines()[1:]  # the first line is the header
        for line in lines[len(self.records) :]:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = {"status": "torn"}  # cut short by the kill
            self.records.append(record)
            self.seen.append((time.time(), run))

    def count(self, status: str = "ok", run: int | None = None) -> int:
        """Count records of a status (in one run, or all)."""
        return sum(
            r.get("status") == status and (run is None or seen[1] == run)
            for r, seen in zip(self.records, self.seen, strict=True)
        )


@dataclass
class Outage:
    """Takes the search backend away for a moment and brings it back."""

    backend: str
    index_dir: Path
    es_dir: Path | None = None
    es_port: int | None = None
    window: tuple[float, float] | None = None

    def __call__(self, run: int, log: Callable[[str], None]) -> None:
        """Make the backend unavailable, then restore it; record the window."""
        began = time.time()
        if self.backend == "elasticsearch":
            from infra.elasticsearch_server import ensure_running, stop

            log(f"run {run}: stopping Elasticsearch ({self.es_dir})")
            stop(self.es_dir)
            ensure_running(self.es_dir, self.es_port or 9200)
        else:
            away = self.index_dir.with_name(self.index_dir.name + ".away")
            log(f"run {run}: index {self.index_dir.name} renamed away for {OUTAGE_S:.0f} s")
            os.rename(self.index_dir, away)
            try:
                time.sleep(OUTAGE_S)
            finally:
                os.rename(away, self.index_dir)
        self.window = (began, time.time())
        log(f"run {run}: search backend back after {self.window[1] - began:.1f} s")
