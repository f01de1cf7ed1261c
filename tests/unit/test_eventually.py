"""The shared waiting helpers return what they waited for and fail with what they last saw."""

from __future__ import annotations

import itertools

import pytest

from tests.helpers.eventually import eventually, eventually_sync, settled, settled_sync


async def test_eventually_returns_the_first_truthy_value() -> None:
    counter = itertools.count()

    async def check() -> int:
        n = next(counter)
        return n if n >= 3 else 0

    assert await eventually(check, timeout=5, every=0) == 3


async def test_eventually_fails_with_the_last_value_seen() -> None:
    async def never() -> list[int]:
        return []

    with pytest.raises(
        AssertionError, match=r"queue drained not reached within 0\.05 s; last: \[\]"
    ):
        await eventually(never, timeout=0.05, every=0.01, what="queue drained")


def test_eventually_sync_returns_the_value_and_times_out_with_a_message() -> None:
    counter = itertools.count()
    assert eventually_sync(lambda: next(counter) >= 2, timeout=5, every=0) is True
    with pytest.raises(AssertionError, match=r"condition not reached within 0\.05 s; last: 0"):
        eventually_sync(lambda: 0, timeout=0.05, every=0.01)


def test_settled_sync_returns_the_last_value_once_nothing_is_left() -> None:
    left = [3, 2, 1]
    assert settled_sync(lambda: left.pop() and left, timeout=5, every=0) == []
    assert settled_sync(lambda: {"pid": 7}, timeout=0.05, every=0.01) == {"pid": 7}


async def test_settled_returns_what_is_still_left_at_the_deadline() -> None:
    left = [1, 2]

    async def drain() -> list[int]:
        return left[1:] if left.pop(0) else left

    assert await settled(drain, timeout=5, every=0) == []

    async def stuck() -> set[int]:
        return {42}

    assert await settled(stuck, timeout=0.05, every=0.01) == {42}
