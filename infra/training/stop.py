"""A stop asked of a training under way (SIGTERM), honoured at its next step, save or evaluation.

The CLI's SIGTERM handler raises SystemExit where the signal lands; landing inside a finalizer
(Python runs `__del__` and weakref callbacks with exceptions "ignored"), it is printed and lost,
and the training ran on to its last epoch and exited 0 (seen once in a full test run). The
handler also records the stop here, and the trainer's callback raises it again from the loop.
"""

from __future__ import annotations

from typing import Any

_asked: list[int] = []


def request_stop(code: int) -> None:
    """Record that the run must stop with exit `code`."""
    _asked.append(code)


def asked() -> int | None:
    """Return the exit code of a stop asked for, or None."""
    return _asked[0] if _asked else None


def stop_callback() -> Any:
    """Return a transformers TrainerCallback that raises SystemExit once a stop was asked for."""
    from transformers import TrainerCallback

    class StopWhenAsked(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            code = asked()
            if code is not None:
                raise SystemExit(code)

        on_evaluate = on_save = on_epoch_end = on_step_end

    return StopWhenAsked()
