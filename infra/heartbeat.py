"""A line on stderr at least every 30 s while long work runs and stderr is not a terminal.

On a terminal the commands draw tqdm bars; in a batch job or a pipe those bars are disabled
(their carriage returns make one unreadable line of a log), and `quorum train` printed nothing
for 50 minutes (issue 28). There a daemon thread prints what the work has done so far —
`quorum: indexing: 120,000 documents (4 m 0 s)` — every `every` seconds until the work ends.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

EVERY_S = 30.0
"""Seconds between lines when stderr is not a terminal."""


class Heartbeat:
    """Print `describe()` every `every` seconds on a stream that is not a terminal."""

    def __init__(
        self,
        describe: Callable[[], str],
        *,
        every: float | None = None,
        stream: TextIO | None = None,
    ):
        self._describe = describe
        self._every = EVERY_S if every is None else every
        self._stream = stream
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def __enter__(self) -> Heartbeat:
        stream = self._stream or sys.stderr
        if not _is_terminal(stream):
            self._started = time.monotonic()
            self._thread = threading.Thread(
                target=self._beat, args=(stream,), name="heartbeat", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _beat(self, stream: TextIO) -> None:
        while not self._stop.wait(self._every):
            try:
                what = self._describe()
            except Exception as exc:  # a progress line must never stop the work
                what = f"working ({type(exc).__name__} reading progress)"
            elapsed = int(time.monotonic() - self._started)
            minutes, seconds = divmod(elapsed, 60)
            took = f"{minutes} m {seconds} s" if minutes else f"{seconds} s"
            print(f"quorum: {what} ({took})", file=stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
