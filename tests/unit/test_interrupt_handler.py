"""Ctrl-C's handler: installed on the loop for the run, never over an inherited ignore."""

import asyncio
import signal

from graphs.cli.interrupts import Interrupts


def test_the_first_interrupt_says_so_at_once_and_asks_the_work_to_stop(capfd):
    async def run():
        with Interrupts("the questions in flight") as interrupts:
            signal.raise_signal(signal.SIGINT)  # handled in this thread, before the next line
            return interrupts.stopping, signal.getsignal(signal.SIGINT)

    # Python's own default, as a terminal gives it: the suite's process may have come to
    # ignore SIGINT, and an ignore is kept on purpose (the other test).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        stopping, during = asyncio.run(run())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, before)
    assert stopping is True and during is not signal.default_int_handler
    assert capfd.readouterr().err == (
        "\nquorum: interrupt: finishing the questions in flight, starting nothing new — "
        "Ctrl-C again to stop now\n"
    )


def test_an_inherited_ignore_is_kept():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:

        async def run():
            with Interrupts():
                return signal.getsignal(signal.SIGINT)

        assert asyncio.run(run()) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
