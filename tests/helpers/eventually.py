"""Waiting for a condition in tests: the one helper instead of hand-written deadline loops.

`eventually` awaits a check until it returns something truthy and returns that value; after
`timeout` seconds it fails with an `AssertionError` that names what was awaited and the last
value seen. `settled` is the mirror for "until nothing is left": it polls until the check
returns something falsy and returns the last value, so the caller asserts on it with the detail.
`eventually_sync` and `settled_sync` take a blocking check (the drills that watch processes).

They poll, and polling is the fallback: a test that can wait on a signal (an event, a job's
terminal state through `Runtime.wait`) should wait on that.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _timed_out(what: str, timeout: float, last: object) -> AssertionError:
    return AssertionError(f"{what or 'condition'} not reached within {timeout:g} s; last: {last!r}")


async def eventually(
    check: Callable[[], Awaitable[T]], timeout: float = 10.0, every: float = 0.02, what: str = ""
) -> T:
    """Await `check()` until it is truthy and return it; `AssertionError` after `timeout` s.

    A check that hangs is cancelled at the deadline too.
    """
    last: object = None

    async def poll() -> T:
        nonlocal last
        while True:
            value = await check()
            if value:
                return value
            last = value
            await asyncio.sleep(every)

    try:
        async with asyncio.timeout(timeout):
            return await poll()
    except TimeoutError:
        raise _timed_out(what, timeout, last) from None


def eventually_sync(
    check: Callable[[], T], timeout: float = 10.0, every: float = 0.05, what: str = ""
) -> T:
    """Call `check()` until it is truthy and return it; `AssertionError` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        time.sleep(every)


async def settled(
    check: Callable[[], Awaitable[T]], timeout: float = 10.0, every: float = 0.1
) -> T:
    """Await `check()` until it is falsy or `timeout` s pass; return the last value."""
    deadline = time.monotonic() + timeout
    value = await check()
    while value and time.monotonic() < deadline:
        await asyncio.sleep(every)
        value = await check()
    return value


def settled_sync(check: Callable[[], T], timeout: float = 10.0, every: float = 0.1) -> T:
    """Call `check()` until it is falsy or `timeout` s pass; return the last value."""
    deadline = time.monotonic() + timeout
    value = check()
    while value and time.monotonic() < deadline:
        time.sleep(every)
        value = check()
    return value
