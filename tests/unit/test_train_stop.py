"""A SIGTERM's stop is raised again from the training loop: a lost SystemExit cannot let it run on."""

import pytest

from infra.training import stop


def test_the_callback_raises_the_recorded_stop_at_the_next_step(monkeypatch):
    monkeypatch.setattr(stop, "_asked", [])
    callback = stop.stop_callback()
    callback.on_step_end(None, None, None)  # nothing asked: training goes on
    callback.on_evaluate(None, None, None)
    stop.request_stop(143)
    for hook in (callback.on_step_end, callback.on_evaluate, callback.on_save):
        with pytest.raises(SystemExit) as raised:
            hook(None, None, None)
        assert raised.value.code == 143
