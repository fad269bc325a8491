"""Ctrl-C on a long command: the first finishes what is in flight, the second stops now.

The first interrupt used to cancel the event loop's tasks and then wait, silent, for the worker
threads (embedding, search, a local model) to come back — about two minutes on `bioasq run` with
the bar frozen, and the question in flight thrown away (issue 28). Now the first interrupt says
at once what quorum is finishing and starts nothing new; the second leaves at once
(`os._exit`, which no worker thread can hold up): what is journalled is on disk already (every
record is fsynced), checkpoints are SQLite transactions, and the run shows as `interrupted` in
`quorum trace list` (its process is gone).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

STOPPED_CODE = 130
"""Exit status after an interrupt (128 + SIGINT), as shells report it."""


class Interrupts:
    """SIGINT for the length of a run: the first sets `stopping`, the second exits.

    A plain signal handler, not the event loop's: Python runs it in the main thread at the next
    bytecode, so the answer comes at once even while the loop is busy in a node's own work
    (the loop's handler waits for the loop's next turn). Its words go straight to the stderr
    file descriptor, so an interrupt that lands inside another write cannot trip over it.
    """

    def __init__(self, in_flight: str = "the question in flight"):
        self._in_flight = in_flight
        self.stopping = False
        self._before: Any = None
        self._installed = False

    def __enter__(self) -> Interrupts:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            return self  # started with Ctrl-C ignored (nohup, a background job): keep it so
        try:
            self._before = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        except ValueError:  # not the main thread: Ctrl-C raises as before
            self._installed = False
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._before)

    def _handle(self, signum: int, frame: object) -> None:
        self.interrupt()

    def interrupt(self) -> None:
        """Handle one Ctrl-C."""
        if not self.stopping:
            self.stopping = True
            _write(
                f"\nquorum: interrupt: finishing {self._in_flight}, starting nothing new — "
                "Ctrl-C again to stop now\n"
            )
            return
        _write("quorum: stopped\n")
        os._exit(STOPPED_CODE)


def _write(text: str) -> None:
    """Write to stderr's file descriptor directly (safe inside a signal handler)."""
    with contextlib.suppress(OSError, ValueError):
        os.write(sys.stderr.fileno(), text.encode("utf-8", "replace"))
