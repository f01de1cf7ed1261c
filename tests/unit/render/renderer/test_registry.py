"""The renderer's change feed wakes a long-poll when an attempt ends, and only then, and says
which attempts ended since the count a caller saw."""

from __future__ import annotations

import asyncio

from deckyard.render.renderer.registry import ChangeFeed


async def test_a_waiter_wakes_on_the_next_ending_and_a_late_one_returns_at_once() -> None:
    feed = ChangeFeed()
    waiter = asyncio.create_task(feed.wait_past(0, timeout=30))
    await asyncio.sleep(0)
    assert not waiter.done()
    feed.bump("a1")
    assert await asyncio.wait_for(waiter, 5) == 1
    assert await feed.wait_past(0, timeout=30) == 1  # already past: no wait at all


async def test_without_an_ending_the_wait_runs_out_with_the_same_count() -> None:
    feed = ChangeFeed()
    feed.bump("a1")
    assert await feed.wait_past(1, timeout=0.01) == 1


def test_the_feed_names_the_attempts_that_ended_past_a_count_and_whether_that_is_all() -> None:
    feed = ChangeFeed(keep=3)
    assert feed.ended_since(0) == ([], True)
    for attempt in ("a", "deck", "deck", "b"):  # a deck attempt's pages count one each
        feed.bump(attempt)
    assert feed.ended_since(1) == (["deck", "b"], True)
    assert feed.ended_since(4) == ([], True)
    # The first ending was forgotten (keep=3): an answer from before it cannot be complete.
    assert feed.ended_since(0) == (["deck", "b"], False)
    # A caller without a count (-1) never gets a complete answer: it looks for itself.
    assert feed.ended_since(-1)[1] is False
