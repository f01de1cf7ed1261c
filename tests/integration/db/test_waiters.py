"""`SharedWaiters`: many waiters, one reader per wake."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database, SharedWaiters
from tests.helpers.eventually import eventually

CHANNEL = "test.rows"
WAITERS = 10


class Rows:
    """Rows that end when the test says so, read as `read_ended` reads them."""

    def __init__(self, ids: Sequence[int]) -> None:
        self.state = {i: "running" for i in ids}
        self.reads = 0
        self.fail: Exception | None = None

    async def read_ended(
        self, _conn: AsyncConnection, ids: Sequence[int]
    ) -> tuple[dict[int, str], set[int]]:
        self.reads += 1
        if self.fail is not None:
            raise self.fail
        ended = {i: f"row {i}" for i in ids if self.state.get(i) == "ended"}
        return ended, {i for i in ids if i not in self.state}


async def test_each_waiter_gets_its_row_with_one_read_per_wake(db: Database) -> None:
    rows = Rows(range(WAITERS))
    waiters = SharedWaiters(db, CHANNEL, rows.read_ended, recheck_seconds=30, name="test")
    tasks = [asyncio.create_task(waiters.wait(i)) for i in range(WAITERS)]
    await registered(rows, WAITERS + 1)  # one read each to register, and the reader's first
    first = rows.reads
    for i in range(WAITERS):
        rows.state[i] = "ended"
        db.bus.wake(CHANNEL)
        assert await asyncio.wait_for(tasks[i], 5) == f"row {i}"
        assert not any(t.done() for t in tasks[i + 1 :])
    assert first <= WAITERS + 1
    # A reader per waiter would read WAITERS - i times at the i-th wake.
    assert rows.reads - first <= WAITERS


async def test_a_missing_row_is_none_and_a_failed_read_reaches_every_waiter(
    db: Database,
) -> None:
    rows = Rows([1, 2])
    waiters = SharedWaiters(db, CHANNEL, rows.read_ended, recheck_seconds=30, name="test")
    assert await asyncio.wait_for(waiters.wait(99), 5) is None
    reads = rows.reads
    tasks = [asyncio.create_task(waiters.wait(i)) for i in (1, 2)]
    await registered(rows, reads + 3)
    rows.fail = RuntimeError("database gone")
    db.bus.wake(CHANNEL)
    for task in tasks:
        with pytest.raises(RuntimeError, match="database gone"):
            await asyncio.wait_for(task, 5)


async def registered(rows: Rows, reads: int) -> None:
    """Wait until the waiters have read once each, and the shared reader once."""

    async def enough() -> bool:
        return rows.reads >= reads

    await eventually(enough, what=f"{reads} reads")
