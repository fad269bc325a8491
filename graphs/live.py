"""A status line for long work: a spinner, what is being done now, and the time it has taken.

The commands (ask, serve) and the terminal chat both show it, so it sits below graphs/cli.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


class LiveStatus:
    """One transient line on the console: spinner, text, elapsed time (ask, chat, index)."""

    def __init__(self, console: Console, text: str):
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task = self._progress.add_task(text, total=None)

    def update(self, text: str) -> None:
        """Say what is being done now."""
        self._progress.update(self._task, description=text)

    def print(self, line: str) -> None:
        """Print a line above the status (it stays when the status goes)."""
        self._progress.console.print(line)

    def __enter__(self) -> LiveStatus:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()
