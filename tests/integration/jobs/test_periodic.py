"""Periodic jobs: one enqueue per cron tick, however many nodes run the schedule."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from deckyard.db import Database
from deckyard.jobs import JobContext, Runtime
from deckyard.jobs.maintenance import Periodic, periodic_enqueue_tick
from tests.helpers.runtime import fast_settings


async def test_each_tick_is_enqueued_once_across_nodes(db: Database, db_url: str) -> None:
    other = Database(db_url)
    p = Periodic("report", "*/5 * * * *", "report", "q", None, 3)
    tick = datetime(2026, 5, 1, 10, 5, tzinfo=UTC)
    try:
        first = await asyncio.gather(
            *(periodic_enqueue_tick(d, p, tick, tick) for d in (db, other, db, other))
        )
        assert sorted(first) == [False, False, False, True]
        assert await periodic_enqueue_tick(db, p, tick, tick) is False
        later = p.next_tick(tick)
        assert later == datetime(2026, 5, 1, 10, 10, tzinfo=UTC)
        assert await periodic_enqueue_tick(other, p, later, later) is True
        rt = Runtime(db, settings=fast_settings(), migrate=False)
        jobs = await rt.list(kind="report")
        assert sorted(j.run_at for j in jobs) == [tick, later]
    finally:
        await other.dispose()


def test_invalid_cron_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid cron"):
        Periodic("x", "every tuesday", "k", "q", None, 1)


async def test_periodic_loop_runs_a_per_second_schedule(db: Database) -> None:
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    seen: list[int] = []

    @rt.handler("tick", queue="cron")
    async def tick(ctx: JobContext) -> None:
        seen.append(ctx.id)

    rt.periodic("* * * * * *", "tick")
    rt.worker(["cron"])
    async with rt:
        await asyncio.sleep(2.6)
    jobs = await Runtime(db, settings=fast_settings(), migrate=False).list(kind="tick")
    assert 2 <= len(jobs) <= 4
    assert len({j.run_at for j in jobs}) == len(jobs)
    assert len(seen) >= 2
