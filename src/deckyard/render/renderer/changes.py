"""A renderer-wide counter of finished attempts that a control plane can long-poll.

`GET /v1/changes?after=N&wait=S` answers as soon as the count passes `N` (or after `S` seconds,
capped by `renderer_changes_max_wait_seconds`) with the count and how many slots are busy. The
control plane keeps one such call open per renderer while it has attempts there, and runs its
receipt pass the moment one finishes instead of at its next timed poll. Nothing is stored: the
count starts at 0 with each epoch.
"""

from __future__ import annotations

import asyncio
import contextlib


class ChangeFeed:
    """Counts attempt endings; `wait_past` blocks until the count moves past what was seen."""

    def __init__(self) -> None:
        self.count = 0
        self._moved = asyncio.Event()

    def bump(self) -> None:
        """Record that an attempt ended and wake every waiter."""
        self.count += 1
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def wait_past(self, seen: int, timeout: float) -> int:
        """The count once it is above `seen`, or the current one after `timeout` seconds."""
        if self.count > seen:
            return self.count
        moved = self._moved
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(moved.wait(), timeout)
        return self.count
