"""A real PostgreSQL deadlock (40P01) on an API write path is retried and the write succeeds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database, WriteRetryPolicy
from deckyard.db.migrate import upgrade
from deckyard.jobs import Job, JobStatus, Runtime
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings

pytestmark = pytest.mark.postgres


@dataclass
class Deadlock:
    """Two transactions that take jobs A and B in opposite order, the cancel's side losing.

    The other session holds B and then asks for A; the cancel holds A (it cancels it) and its
    hook then asks for B. The cancel's side has the short `deadlock_timeout`, so PostgreSQL
    aborts it with 40P01. The hook provokes this on its first `times` calls only.
    """

    rt: Runtime
    other: psycopg.AsyncConnection[object]
    monitor: psycopg.AsyncConnection[object]
    a: Job
    b: Job
    times: int = 1
    calls: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def _waiting(self) -> bool:
        pid = self.other.info.backend_pid
        cur = await self.monitor.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        )
        row = await cur.fetchone()
        return row is not None and row[0] == "Lock"

    async def _take_a_then_let_go(self) -> None:
        await self.other.execute("UPDATE jobs SET priority = priority WHERE id = %s", (self.a.id,))
        await self.other.rollback()

    async def hook(self, conn: AsyncConnection, ids: list[int], now: datetime) -> None:
        """The cancel hook: inside the cancel's transaction, which already holds A."""
        self.calls += 1
        if self.calls > self.times:
            return
        await self.other.execute("SET deadlock_timeout = '60s'")
        await self.other.execute("UPDATE jobs SET priority = priority WHERE id = %s", (self.b.id,))
        await conn.execute(text("SET LOCAL deadlock_timeout = '50ms'"))
        self.tasks.append(asyncio.create_task(self._take_a_then_let_go()))
        await eventually(self._waiting)
        await conn.execute(
            text("UPDATE jobs SET priority = priority WHERE id = :b"), {"b": self.b.id}
        )


@asynccontextmanager
async def deadlock(url: str, attempts: int) -> AsyncIterator[Deadlock]:
    db = Database(url, write_retry=WriteRetryPolicy(attempts=attempts, base_delay=0.01))
    await upgrade(db)
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    await rt.start(run_loops=False)
    other = await psycopg.AsyncConnection.connect(url)
    monitor = await psycopg.AsyncConnection.connect(url, autocommit=True)
    d: Deadlock | None = None
    try:
        a = await rt.enqueue("k", queue="q", run_at=3600)
        b = await rt.enqueue("k", queue="q", run_at=3600)
        d = Deadlock(rt, other, monitor, a, b)
        rt.on_cancel(d.hook)
        yield d
        await asyncio.gather(*d.tasks)
    finally:
        for task in d.tasks if d is not None else []:
            task.cancel()
        await other.close()
        await monitor.close()
        await rt.stop()
        await db.dispose()


async def test_a_deadlocked_cancel_is_retried_and_succeeds(pg_schema_url: str) -> None:
    async with deadlock(pg_schema_url, attempts=4) as d:
        job = await d.rt.cancel(d.a.id)
        assert job.status is JobStatus.CANCELLED
        assert d.calls == 2
        assert d.rt.db.stats.write_conflicts == 1
        other = await d.rt.get(d.b.id)
        assert other is not None and other.status is JobStatus.PENDING


async def test_a_deadlock_past_the_attempt_budget_reaches_the_caller(pg_schema_url: str) -> None:
    async with deadlock(pg_schema_url, attempts=1) as d:
        with pytest.raises(DBAPIError, match="deadlock detected"):
            await d.rt.cancel(d.a.id)
        assert d.rt.db.stats.write_conflicts == 0
        still = await d.rt.get(d.a.id)
        assert still is not None and still.status is JobStatus.PENDING
