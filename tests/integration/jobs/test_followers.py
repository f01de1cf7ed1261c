"""Event streams of many jobs share one reader (`jobs.waiters.EventFollowers`)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import event, update

from deckyard.db import Database
from deckyard.jobs import JobContext, Runtime
from deckyard.jobs.schema import jobs
from deckyard.jobs.store import events_append
from deckyard.jobs.waiters import EventFollowers
from tests.helpers.runtime import fast_settings

FOLLOWERS = 8
STEPS = 3


async def test_many_followers_each_see_their_job_with_reads_per_event_not_per_follower(
    db: Database,
) -> None:
    reads = 0

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        nonlocal reads
        if statement.lstrip().upper().startswith("SELECT") and "FROM job_events" in statement:
            reads += 1

    event.listen(db.engine.sync_engine, "before_cursor_execute", count)
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    gates: dict[int, asyncio.Event] = {}

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> None:
        gate = gates.setdefault(ctx.id, asyncio.Event())
        await gate.wait()
        for i in range(STEPS):
            await ctx.emit("step", {"i": i})

    rt.worker(["q"], concurrency=FOLLOWERS)
    async with rt:
        jobs_ = [await rt.enqueue("k", {"n": n}) for n in range(FOLLOWERS)]
        for job in jobs_:
            gates.setdefault(job.id, asyncio.Event())

        async def follow(job_id: int) -> list[tuple[str, int]]:
            return [(ev.type, ev.job_id) async for ev in rt.events(job_id)]

        followers = [asyncio.create_task(follow(j.id)) for j in jobs_]
        await asyncio.sleep(0)
        for job in jobs_:  # one job after the other, so wakes do not coalesce much
            gates[job.id].set()
            await rt.wait(job.id, timeout=10)
        seen = await asyncio.wait_for(asyncio.gather(*followers), 10)
    event.remove(db.engine.sync_engine, "before_cursor_execute", count)
    for job, events in zip(jobs_, seen, strict=True):
        assert [t for t, _ in events] == ["started", *["step"] * STEPS, "succeeded"]
        assert {j for _, j in events} == {job.id}
    events_total = FOLLOWERS * (STEPS + 2)
    # One follower per job re-reading on every wake would read FOLLOWERS times per event.
    assert reads < 2 * events_total + FOLLOWERS
    assert reads < FOLLOWERS * events_total / 2


async def test_a_full_batch_moves_every_cursor(db: Database) -> None:
    """A follower whose job has no events in a full batch does not pin the next read."""
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    async with rt:
        busy = await rt.enqueue("k", {})
        quiet = await rt.enqueue("k", {})
        now = rt.clock.now()
        await db.write(
            lambda conn: events_append(
                db, conn, [(busy.id, "step", {"i": i}) for i in range(5)], now
            )
        )
        async with db.write_transaction() as conn:
            await conn.execute(
                update(jobs)
                .where(jobs.c.id.in_([busy.id, quiet.id]))
                .values(status="succeeded", finished_at=now)
            )
        followers = EventFollowers(db, recheck_seconds=5, batch=2)

        async def follow(job_id: int) -> list[int]:
            return [ev.data["i"] async for ev in followers.follow(job_id, 0)]

        got = await asyncio.wait_for(asyncio.gather(follow(busy.id), follow(quiet.id)), 10)
    assert got == [[0, 1, 2, 3, 4], []]


async def test_a_follower_of_a_missing_job_ends_at_once(db: Database) -> None:
    followers = EventFollowers(db, recheck_seconds=5)
    got = await asyncio.wait_for(_collect(followers, 987654), 10)
    assert got == []


async def _collect(followers: EventFollowers, job_id: int) -> list[str]:
    return [ev.type async for ev in followers.follow(job_id, 0)]
