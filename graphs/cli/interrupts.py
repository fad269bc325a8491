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

import asyncio
import os
import signal
import sys
from collections.abc import Callable

STOPPED_CODE = 130
"""Exit status after an interrupt (128 + SIGINT), as shells report it."""


class Interrupts:
    """SIGINT on the running event loop: the first sets `stopping`, the second exits."""

    def __init__(self, say: Callable[[str], None], in_flight: str = "the question in flight"):
        self._say = say
        self._in_flight = in_flight
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> Interrupts:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            return self  # started with Ctrl-C ignored (nohup, a background job): keep it so
        try:
            self._loop = asyncio.get_running_loop()
            self._loop.add_signal_handler(signal.SIGINT, self.interrupt)
        except (RuntimeError, NotImplementedError, ValueError):
            self._loop = None  # not the main thread, or no signals here: Ctrl-C raises as before
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGINT)

    def interrupt(self) -> None:
        """Handle one Ctrl-C."""
        if not self.stopping:
            self.stopping = True
            self._say(
                f"interrupt: finishing {self._in_flight}, starting nothing new — "
                "Ctrl-C again to stop now"
            )
            return
        self._say("stopped")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(STOPPED_CODE)
