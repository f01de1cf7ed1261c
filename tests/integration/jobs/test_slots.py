"""Parents waiting for children on the same worker hold no slot, on SQLite and PostgreSQL.

Held slots deadlock here: two slots, five parents, each parent waits for a child on the same
queue, so two waiting parents would leave no slot for any child.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import update

from deckyard.db import Database
from deckyard.jobs import EnqueueSpec, JobContext, JobStatus, Runtime
from deckyard.jobs.schema import jobs
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings


def make_runtime(db: Database, **over: Any) -> Runtime:
    return Runtime(db, settings=fast_settings(**over), migrate=False)


async def test_five_parents_and_their_children_on_two_slots(db: Database) -> None:
    rt = make_runtime(db)
    busy = peak = 0

    @rt.handler("child", queue="q")
    async def child(ctx: JobContext) -> int:
        nonlocal busy, peak
        busy += 1
        peak = max(peak, busy)
        try:
            await asyncio.sleep(0.05)
        finally:
            busy -= 1
        return int(ctx.payload["n"])

    @rt.handler("parent", queue="q")
    async def parent(ctx: JobContext) -> int:
        kid = await rt.enqueue("child", {"n": ctx.payload["n"]}, parent_id=ctx.id)
        done = await ctx.wait_released(rt.wait(kid.id))
        return int(done.result) * 10

    worker = rt.worker(["q"], concurrency=2)
    async with rt:
        parents = [await rt.enqueue("parent", {"n": n}) for n in range(5)]
        ended = [await rt.wait(p.id, timeout=30) for p in parents]
        assert [(j.status, j.result, j.attempt) for j in ended] == [
            (JobStatus.SUCCEEDED, n * 10, 1) for n in range(5)
        ]
        assert worker.stats.most_occupied <= 2 and worker.stats.suspensions == 5
        assert worker.stats.most_suspended >= 2
        assert worker.occupied == 0 and not worker.suspended
    assert peak <= 2


async def test_a_suspended_parent_keeps_its_lease_and_is_cancelled_at_once(db: Database) -> None:
    rt = make_runtime(db)
    kid_started = asyncio.Event()
    kid_ids: list[int] = []

    @rt.handler("child", queue="q")
    async def child(ctx: JobContext) -> None:
        kid_started.set()
        await asyncio.Event().wait()

    @rt.handler("parent", queue="q")
    async def parent(ctx: JobContext) -> None:
        kid = await rt.enqueue("child", parent_id=ctx.id)
        kid_ids.append(kid.id)
        await ctx.wait_released(rt.wait(kid.id))

    worker = rt.worker(["q"], concurrency=1)
    lease = rt.settings.job_lease_seconds
    async with rt:
        top = await rt.enqueue("parent")
        await asyncio.wait_for(kid_started.wait(), 10)  # the child runs in the parent's slot
        assert worker.suspended == {top.id} and worker.occupied == 1
        beats = rt.metrics.heartbeats
        await eventually(
            lambda: asyncio.sleep(0, rt.metrics.heartbeats >= beats + int(lease / 0.3) + 1),
            timeout=10,
            what="heartbeats for longer than a lease",
        )
        running = await rt.get(top.id)
        assert running is not None and running.status == JobStatus.RUNNING
        assert running.attempt == 1 and worker.suspended == {top.id}
        await rt.cancel(top.id)
        done = await rt.wait(top.id, timeout=5)
        kid = await rt.wait(kid_ids[0], timeout=5)
        assert done.status == JobStatus.CANCELLED
        assert kid.status == JobStatus.CANCELLED
        assert worker.occupied == 0 and not worker.suspended


async def test_a_suspended_parents_deadline_ends_it_though_no_slot_is_free(db: Database) -> None:
    rt = make_runtime(db)
    kid_started = asyncio.Event()
    go_on = asyncio.Event()

    @rt.handler("child", queue="q")
    async def child(ctx: JobContext) -> None:
        kid_started.set()
        await go_on.wait()

    @rt.handler("parent", queue="q")
    async def parent(ctx: JobContext) -> None:
        kid = await rt.enqueue("child", parent_id=ctx.id)
        await ctx.wait_released(rt.wait(kid.id))

    worker = rt.worker(["q"], concurrency=1)
    async with rt:
        top = await rt.enqueue("parent", deadline=1.0)
        await asyncio.wait_for(kid_started.wait(), 10)
        done = await rt.wait(top.id, timeout=10)  # the child still holds the only slot
        assert (done.status, done.error_code) == (JobStatus.FAILED, "DEADLINE_EXCEEDED")
        assert worker.occupied == 1 and not worker.suspended
        go_on.set()
    assert worker.stats.most_occupied == 1


async def test_past_the_bound_a_parent_waits_in_its_slot(db: Database) -> None:
    rt = make_runtime(db, job_max_suspended=1)
    lent: list[bool] = []
    both_waiting = asyncio.Event()

    @rt.handler("child", queue="q")
    async def child(ctx: JobContext) -> int:
        await both_waiting.wait()
        return int(ctx.payload["n"])

    @rt.handler("parent", queue="q")
    async def parent(ctx: JobContext) -> int:
        kid = await rt.enqueue("child", {"n": ctx.payload["n"]}, parent_id=ctx.id)
        async with ctx.slot_released() as released:
            lent.append(released)
            if len(lent) == 2:
                both_waiting.set()
            done = await rt.wait(kid.id)
        return int(done.result)

    worker = rt.worker(["q"], concurrency=2)
    async with rt:
        parents = await rt.enqueue_many(
            [EnqueueSpec("parent", {"n": n}, queue="q") for n in range(2)]
        )
        ended = [await rt.wait(p.id, timeout=30) for p in parents]
    assert [j.result for j in ended] == [0, 1]
    assert worker.stats.most_suspended == 1 and worker.stats.most_occupied <= 2
    assert sorted(lent) == [False, True]  # the second waited in its slot; the first's ran a child


async def test_a_suspended_parent_that_lost_its_lease_ends_without_a_finish(db: Database) -> None:
    rt = make_runtime(db)
    kid_started = asyncio.Event()

    @rt.handler("child", queue="q")
    async def child(ctx: JobContext) -> None:
        kid_started.set()
        await asyncio.Event().wait()

    @rt.handler("parent", queue="q")
    async def parent(ctx: JobContext) -> str:
        kid = await rt.enqueue("child", parent_id=ctx.id)
        await ctx.wait_released(rt.wait(kid.id))
        return "finished"  # must never be recorded: the lease is gone

    worker = rt.worker(["q"], concurrency=1)
    async with rt:
        top = await rt.enqueue("parent")
        await asyncio.wait_for(kid_started.wait(), 10)
        assert worker.suspended == {top.id}
        lost = rt.metrics.lost_cas
        async with db.write_transaction() as conn:  # another owner took the job over
            await conn.execute(
                update(jobs).where(jobs.c.id == top.id).values(lease_owner="someone-else")
            )
        await eventually(
            lambda: asyncio.sleep(0, top.id not in worker.running), what="the parent stopped"
        )
        assert rt.metrics.lost_cas == lost + 1 and not worker.suspended
        row = await rt.get(top.id)
        assert row is not None and row.status == JobStatus.RUNNING and row.result is None
        assert row.lease_owner == "someone-else"
