r"""Consoles that never write a control character they were handed: ESC and its kin are shown.

A question, a model's output or a title can carry terminal escapes (ESC [ 2 J clears the
screen; ESC ] 52 writes the clipboard). Everything `quorum` prints to a terminal — ask, chat,
trace, bioasq, every command — goes through one of these consoles, which shows such characters as
`\x1b` instead of sending them (issue 48). Newlines and tabs pass.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """Return text with its control characters (newline and tab aside) written as escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


class SafeConsole(Console):
    """A rich Console whose printed strings have their control characters escaped."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print as rich does, each string's control characters shown as escapes."""
        super().print(*(shown(o) if isinstance(o, str) else o for o in objects), **kwargs)
