"""Ctrl-C's handler: installed on the loop for the run, never over an inherited ignore."""

import asyncio
import signal

from graphs.cli.interrupts import Interrupts


def test_the_first_interrupt_says_so_and_asks_the_work_to_stop():
    said: list[str] = []

    async def run():
        with Interrupts(said.append, "the questions in flight") as interrupts:
            interrupts.interrupt()
            return interrupts.stopping

    assert asyncio.run(run()) is True
    assert said == [
        "interrupt: finishing the questions in flight, starting nothing new — "
        "Ctrl-C again to stop now"
    ]


def test_an_inherited_ignore_is_kept():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:

        async def run():
            with Interrupts(lambda m: None):
                return signal.getsignal(signal.SIGINT)

        assert asyncio.run(run()) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
