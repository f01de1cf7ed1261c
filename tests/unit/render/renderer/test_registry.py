"""The renderer's change feed wakes a long-poll when an attempt ends, and only then."""

from __future__ import annotations

import asyncio

from deckyard.render.renderer.registry import ChangeFeed


async def test_a_waiter_wakes_on_the_next_ending_and_a_late_one_returns_at_once() -> None:
    feed = ChangeFeed()
    waiter = asyncio.create_task(feed.wait_past(0, timeout=30))
    await asyncio.sleep(0)
    assert not waiter.done()
    feed.bump()
    assert await asyncio.wait_for(waiter, 5) == 1
    assert await feed.wait_past(0, timeout=30) == 1  # already past: no wait at all


async def test_without_an_ending_the_wait_runs_out_with_the_same_count() -> None:
    feed = ChangeFeed()
    feed.bump()
    assert await feed.wait_past(1, timeout=0.01) == 1
