"""What a fault drill watches and does: the batch journal as it grows, and the search outage."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.errors import UserError

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

    def finished(self, run: int | None = None) -> int:
        """Count questions done, answered or honestly insufficient (in one run, or all).

        The drill's kill and outage points count these: since the support check (issue 47) a
        simulated answer may be refused, so a batch can end with fewer 'ok' records than the
        kill point and never be killed.
        """
        return self.count("ok", run) + self.count("insufficient", run)


@dataclass
class Outage:
    """Takes the search backend away for a moment and brings it back."""

    backend: str
    index_dir: Path
    es_dir: Path | None = None
    es_port: int | None = None
    window: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        """Refuse a backend the drill cannot take away (never take away another one's index)."""
        if self.backend not in TAKE_AWAY:
            raise UserError(
                f"the fault drill cannot take search backend {self.backend!r} away; "
                f"it knows {', '.join(TAKE_AWAY)}"
            )

    def __call__(self, run: int, log: Callable[[str], None]) -> None:
        """Make the backend unavailable, then restore it; record the window."""
        began = time.time()
        TAKE_AWAY[self.backend](self, run, log)
        self.window = (began, time.time())
        log(f"run {run}: search backend back after {self.window[1] - began:.1f} s")


def _restart_node(outage: Outage, run: int, log: Callable[[str], None]) -> None:
    from lab.elasticsearch_server import ensure_running, stop

    log(f"run {run}: stopping Elasticsearch ({outage.es_dir})")
    stop(outage.es_dir)
    ensure_running(outage.es_dir, outage.es_port or 9200)


def _rename_away(outage: Outage, run: int, log: Callable[[str], None]) -> None:
    index_dir = outage.index_dir
    away = index_dir.with_name(index_dir.name + ".away")
    log(f"run {run}: index {index_dir.name} renamed away for {OUTAGE_S:.0f} s")
    os.rename(index_dir, away)
    try:
        time.sleep(OUTAGE_S)
    finally:
        os.rename(away, index_dir)


TAKE_AWAY: dict[str, Callable[[Outage, int, Callable[[str], None]], None]] = {
    "embedded": _rename_away,
    "elasticsearch": _restart_node,
}
"""How the drill takes each search backend away (a key of infra.search.backends.BACKENDS)."""
