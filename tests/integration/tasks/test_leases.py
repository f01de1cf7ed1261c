"""Task leases (issue 14 item 8), on SQLite and PostgreSQL: a task whose driver vanished resumes
within one lease of that driver's last claim, is driven by one executor at a time, and runs each
stage once. Reconciliation's staleness thresholds are an hour here, so only the lease can
explain a resume."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from deckyard.db import Database
from deckyard.jobs import EnqueueSpec, JobContext, Runtime
from deckyard.jobs.schema import jobs
from deckyard.loop import Loop
from deckyard.tasks import Stage, StageContext, TaskExecutor, TaskKind
from deckyard.tasks.schema import tasks
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings

LEASE = 2.0
HOUR = {"pending": 3600.0, "running": 3600.0}


class Rig:
    """A runtime with a two-stage task kind whose first stage waits on `gate`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.settings = fast_settings(
            reconciliation_thresholds_seconds=HOUR,
            task_lease_seconds=LEASE,
            task_heartbeat_interval_seconds=0.2,
            # the stage's jobs wait on `gate` for several task leases: with the test cadence's
            # 1.5 s job lease, a 1.2 s stall of a loaded CI machine re-ran them (counted twice)
            job_lease_seconds=30.0,
            job_heartbeat_interval_seconds=1.0,
        )
        self.rt = Runtime(db, settings=self.settings, migrate=False)
        self.gate = asyncio.Event()
        self.runs = {"double": 0, "total": 0}

        @self.rt.handler("double", queue="t")
        async def double(ctx: JobContext) -> int:
            self.runs["double"] += 1
            await self.gate.wait()
            return int(ctx.payload["x"]) * 2

        @self.rt.handler("total", queue="t")
        async def total(ctx: JobContext) -> int:
            self.runs["total"] += 1
            return sum(ctx.payload["values"])

        async def doubles(ctx: StageContext) -> list[EnqueueSpec]:
            return [EnqueueSpec("double", {"x": x}) for x in ctx.params["xs"]]

        async def add_up(ctx: StageContext) -> list[EnqueueSpec]:
            return [EnqueueSpec("total", {"values": ctx.state["results"]["double"]["results"]})]

        self.kind = TaskKind("sum", [Stage("double", doubles), Stage("total", add_up)])
        self.rt.worker(["t"])

    def executor(self) -> TaskExecutor:
        ex = TaskExecutor(self.db, self.rt, self.settings)
        ex.register(self.kind)
        return ex

    async def lease_of(self, task_id: int) -> tuple[str | None, datetime | None]:
        async with self.db.read_connection() as conn:
            row = (
                await conn.execute(
                    select(tasks.c.owner, tasks.c.lease_expires_at).where(tasks.c.id == task_id)
                )
            ).one()
        return row.owner, row.lease_expires_at

    async def n_jobs(self) -> int:
        async with self.db.read_connection() as conn:
            return int((await conn.execute(select(func.count()).select_from(jobs))).scalar_one())


def lease_loop(ex: TaskExecutor) -> Loop:
    [loop] = [lp for lp in ex.loops if lp.name == "tasks.lease"]
    return loop


async def stage_started(ex: TaskExecutor, task_id: int) -> None:
    async def started() -> bool:
        return "stage_started" in [e["type"] for e in await ex.events(task_id)]

    await eventually(started, what="stage 1 started")


async def at_rest(ex: TaskExecutor, task_id: int, timeout: float = 10 * LEASE) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        row = await ex.get(task_id)
        return row if row and row["status"] in ("succeeded", "failed", "cancelled") else None

    return await eventually(done, timeout=timeout, what=f"task {task_id} at rest")


def assert_each_stage_once(events: list[dict[str, Any]]) -> None:
    types = [e["type"] for e in events]
    started = [e["data"]["stage"] for e in events if e["type"] == "stage_started"]
    finished = [e["data"]["stage"] for e in events if e["type"] == "stage_finished"]
    assert started == ["double", "total"], types
    assert finished == ["double", "total"], types
    assert types.count("succeeded") == 1 and types[-1] == "succeeded", types


async def test_a_task_whose_owner_vanished_resumes_within_one_lease(db: Database) -> None:
    rig = Rig(db)
    a = rig.executor()  # never started: it claims, but never heartbeats
    async with rig.rt:
        task_id = await a.create("sum", {"xs": [3]})
        await stage_started(a, task_id)
        # A dies mid-stage: its drive ends without a word, its lease stays in the row.
        [drive] = [t for t in asyncio.all_tasks() if t.get_name() == f"task:{task_id}"]
        drive.cancel()
        await asyncio.gather(drive, return_exceptions=True)
        owner, expiry = await rig.lease_of(task_id)
        assert owner == a.owner and expiry is not None

        b = rig.executor()
        await b.start()
        try:
            # A's lease still runs: the start-up pass leaves the task alone.
            assert b.resumed == 0 and b.in_flight() == set()
            rig.gate.set()
            row = await at_rest(b, task_id)
        finally:
            await b.stop()
        events = await b.events(task_id)
        n_jobs = await rig.n_jobs()
    assert row["status"] == "succeeded"
    assert row["result"]["results"]["total"]["results"] == [6]
    assert b.resumed == 1
    resumed_at = next(e["created_at"] for e in events if e["type"] == "stage_progress")
    assert expiry <= resumed_at, "resumed while the dead owner's lease still ran"
    assert (resumed_at - expiry).total_seconds() <= LEASE, (expiry, resumed_at)
    assert_each_stage_once(events)
    assert rig.runs == {"double": 1, "total": 1} and n_jobs == 2
    assert await rig.lease_of(task_id) == (None, None)


async def test_a_live_owner_keeps_its_task(db: Database) -> None:
    rig = Rig(db)
    a, b = rig.executor(), rig.executor()
    async with rig.rt:
        await a.start()
        await b.start()
        try:
            task_id = await a.create("sum", {"xs": [1, 2]})
            await stage_started(a, task_id)
            _, first_expiry = await rig.lease_of(task_id)
            assert first_expiry is not None

            async def outlived_first_lease() -> bool:
                owner, expiry = await rig.lease_of(task_id)
                assert owner == a.owner
                return expiry is not None and expiry > a.clock.now() > first_expiry

            await eventually(outlived_first_lease, timeout=5 * LEASE, what="A heartbeats")
            ticks = lease_loop(b).stats.ticks

            async def b_looked_again() -> bool:
                return lease_loop(b).stats.ticks >= ticks + 2

            await eventually(b_looked_again, timeout=5 * LEASE, what="B scans after expiry")
            assert b.resumed == 0 and b.in_flight() == set()
            owner, _ = await rig.lease_of(task_id)
            assert owner == a.owner
            rig.gate.set()
            row = await at_rest(a, task_id)
        finally:
            await b.stop()
            await a.stop()
        events = await a.events(task_id)
    assert row["status"] == "succeeded"
    assert_each_stage_once(events)
    assert rig.runs == {"double": 2, "total": 1}


async def test_a_graceful_stop_hands_the_task_over_at_once(db: Database) -> None:
    rig = Rig(db)
    a = rig.executor()
    async with rig.rt:
        await a.start()
        task_id = await a.create("sum", {"xs": [5]})
        await stage_started(a, task_id)
        await a.stop()
        assert await rig.lease_of(task_id) == (None, None)
        b = rig.executor()
        await b.start()
        try:
            assert b.resumed == 1  # the start-up pass, no lease to wait for
            rig.gate.set()
            row = await at_rest(b, task_id)
        finally:
            await b.stop()
        events = await b.events(task_id)
    assert row["status"] == "succeeded"
    assert_each_stage_once(events)
    assert rig.runs == {"double": 1, "total": 1}


async def test_a_drive_that_lost_its_lease_stops(db: Database) -> None:
    rig = Rig(db)
    a = rig.executor()
    async with rig.rt:
        await a.start()
        try:
            task_id = await a.create("sum", {"xs": [7]})
            await stage_started(a, task_id)
            async with db.write_transaction() as conn:  # another process took it over
                await conn.execute(
                    tasks.update().where(tasks.c.id == task_id).values(owner="someone-else")
                )

            async def stopped() -> bool:
                return a.in_flight() == set()

            await eventually(stopped, timeout=5 * LEASE, what="A stops driving")
            assert a.leases_lost == 1
        finally:
            rig.gate.set()
            await a.stop()
        owner, _ = await rig.lease_of(task_id)
    assert owner == "someone-else"  # a graceful stop hands back only its own leases
