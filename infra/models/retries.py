"""Calls tried again while the endpoint is busy rather than down, within a stated budget.

A server under load answers some calls and refuses others (429, 5xx). Counting every refusal
against a call's `max_retries` dropped ensemble members against a server that refused every
other call (issue 56): two members retrying side by side could each draw three refusals. So:

- A refusal while the endpoint answers other calls (between this call's tries, some call to it
  came back) is the server being busy: the call tries again, as often as RETRY_BUDGET_S allows.
- A refusal while it answers nothing, a timeout or a dropped connection counts against the
  model's `max_retries` (settings: models.*.max_retries): an endpoint that is down is named
  after a few seconds, not after the whole budget.
- A 429 waits as its Retry-After asks; other waits double from FIRST_WAIT_S to LONGEST_WAIT_S,
  each drawn between half and all of that (members that failed together retry apart).
- No try starts later than RETRY_BUDGET_S after the call's first; a Retry-After that would
  reach past it ends the call at once. `max_retries = 0` turns retries off.

When the call gives up, its error says so: what the server did last, how many tries, how long,
and which limit ended it (docs/configuration.md).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from infra.models.failures import retry_after, status_of, transient

RETRY_BUDGET_S = 60.0
"""No retry of a call starts later than this many seconds after its first try."""
FIRST_WAIT_S = 0.5
"""The wait before a call's first retry when the server names none."""
LONGEST_WAIT_S = 8.0
"""The longest wait between two tries when the server names none."""

T = TypeVar("T")


@dataclass
class Health:
    """What an endpoint has done lately, shared by every call to it."""

    answered: int = 0
    """Calls it answered since the process started: a reply, or a refusal no retry can
    change (a 401, a web page)."""


class RetriesSpent(Exception):
    """A call failed on every try its budget allowed; `last` is the last failure."""

    def __init__(self, last: BaseException, tries: int, seconds: float, why: str):
        super().__init__(f"gave up after {tries} tries in {seconds:.0f} s: {why}")
        self.last = last
        self.tries = tries


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    health: Health,
    max_retries: int,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Return `call()`'s result, trying again while it may succeed.

    The caller counts its own tries (`ChatModel._call`): a count returned here would be lost
    whenever the call ends in an error, which is when the trace needs it most.

    Raises:
        RetriesSpent: every try failed and the budget, or max_retries, is spent.
        Exception: the call's own error when another try cannot help (a 401, a web page).
    """
    started = clock()
    tries = counted = 0
    seen = health.answered
    while True:
        tries += 1
        try:
            result = await call()
        except Exception as exc:
            kind = transient(exc)
            if kind is None:
                health.answered += 1  # it answered, if not as asked (a 401, a web page)
                raise
            if max_retries <= 0:
                raise
            busy = kind == "busy" and health.answered != seen
            seen = health.answered
            counted += not busy
            elapsed = clock() - started
            if counted > max_retries:
                why = f"the endpoint answered no call in between (max_retries {max_retries})"
                raise RetriesSpent(exc, tries, elapsed, why) from exc
            asked = retry_after(exc) if status_of(exc) == 429 else None
            wait = asked if asked is not None else _backoff(tries)
            if elapsed + wait > RETRY_BUDGET_S:
                why = (
                    f"the server asked to wait {asked:g} s"
                    if asked is not None
                    else "a further wait"
                ) + f", past the {RETRY_BUDGET_S:g} s retry budget"
                raise RetriesSpent(exc, tries, elapsed, why) from exc
            await sleep(wait)
            continue
        health.answered += 1
        return result


def _backoff(tries: int) -> float:
    longest = min(LONGEST_WAIT_S, FIRST_WAIT_S * 2 ** (tries - 1))
    return random.uniform(longest / 2, longest)
