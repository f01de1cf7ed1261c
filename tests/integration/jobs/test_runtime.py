"""The job runtime's semantics on SQLite and PostgreSQL (DESIGN.md section 3)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select, update

from deckyard.db import Database
from deckyard.jobs import (
    EnqueueSpec,
    JobContext,
    JobError,
    JobNotFound,
    JobStateError,
    JobStatus,
    RecoveryPolicy,
    Runtime,
    recover_expired,
)
from deckyard.jobs.schema import job_events, jobs
from deckyard.jobs.store import job_claim, jobs_complete
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings


def make_runtime(db: Database, **over: Any) -> Runtime:
    return Runtime(db, settings=fast_settings(**over), migrate=False)


async def test_enqueue_run_result_and_events(db: Database) -> None:
    rt = make_runtime(db)

    @rt.handler("echo", queue="q")
    async def echo(ctx: JobContext) -> Any:
        await ctx.emit("progress", {"pct": 50})
        return {"echo": ctx.payload, "attempt": ctx.attempt}

    rt.worker(["q"], concurrency=2)
    async with rt:
        job = await rt.enqueue("echo", {"a": 1})
        done = await rt.wait(job.id, timeout=10)
        types = [e.type async for e in rt.events(job.id)]
    assert done.status == JobStatus.SUCCEEDED
    assert done.result == {"echo": {"a": 1}, "attempt": 1}
    assert types == ["started", "progress", "succeeded"]
    assert rt.metrics.completions["succeeded"] == 1


async def test_get_without_payload_reads_the_rest(db: Database) -> None:
    rt = make_runtime(db)
    async with rt:
        job = await rt.enqueue("k", {"html": "x" * 1000}, queue="q", workspace_id="ws")
        full = await rt.get(job.id)
        light = await rt.get(job.id, payload=False)
        assert await rt.get(job.id + 1000, payload=False) is None
    assert full is not None and full.payload == {"html": "x" * 1000}
    assert light is not None and light.payload is None
    assert {**light.to_dict(), "payload": full.payload} == full.to_dict()


async def test_dedupe_under_concurrent_enqueues(db: Database) -> None:
    rt = make_runtime(db)
    async with rt:
        got = await asyncio.gather(
            *(rt.enqueue("k", {"i": i}, queue="q", dedupe_key="same") for i in range(50))
        )
        assert len({j.id for j in got}) == 1
        async with db.write_transaction() as conn:
            await conn.execute(
                update(jobs).where(jobs.c.id == got[0].id).values(status="succeeded")
            )
        again = await rt.enqueue("k", {}, queue="q", dedupe_key="same")
        assert again.id != got[0].id
        assert len(await rt.list(queue="q")) == 2


async def test_retry_with_backoff_then_success(db: Database) -> None:
    rt = make_runtime(db)
    runs: list[int] = []

    @rt.handler("flaky", queue="q", max_attempts=3)
    async def flaky(ctx: JobContext) -> str:
        runs.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RuntimeError("boom")
        return "ok"

    rt.worker(["q"])
    async with rt:
        job = await rt.enqueue("flaky")
        done = await rt.wait(job.id, timeout=10)
        types = [e.type async for e in rt.events(job.id)]
    assert runs == [1, 2, 3]
    assert done.status == JobStatus.SUCCEEDED and done.attempt == 3
    assert types.count("retry_scheduled") == 2


async def test_attempt_bound_is_exact(db: Database) -> None:
    rt = make_runtime(db)
    runs: list[int] = []

    @rt.handler("always", queue="q", max_attempts=3)
    async def always(ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        raise RuntimeError("never works")

    rt.worker(["q"])
    async with rt:
        job = await rt.enqueue("always")
        done = await rt.wait(job.id, timeout=10)
    assert runs == [1, 2, 3]
    assert done.status == JobStatus.FAILED and done.error_code == "HANDLER_ERROR"


async def test_non_retryable_error_fails_at_once(db: Database) -> None:
    rt = make_runtime(db)
    runs = 0

    @rt.handler("bad", queue="q", max_attempts=5)
    async def bad(ctx: JobContext) -> None:
        nonlocal runs
        runs += 1
        raise JobError("BAD_INPUT", "payload is wrong", retryable=False)

    rt.worker(["q"])
    async with rt:
        done = await rt.wait((await rt.enqueue("bad")).id, timeout=10)
    assert runs == 1 and done.status == JobStatus.FAILED and done.error_code == "BAD_INPUT"


async def test_expired_lease_cannot_finish_even_before_recovery(db: Database) -> None:
    rt = make_runtime(db)
    started = asyncio.Event()
    release = asyncio.Event()

    @rt.handler("slow", queue="q", max_attempts=1)
    async def slow(ctx: JobContext) -> str:
        started.set()
        await release.wait()
        return "late"

    w = rt.worker(["q"])
    await rt.start()
    try:
        for loop in rt.maintenance.loops:
            await loop.stop()  # no recovery: the lease is expired but not yet recovered
        job = await rt.enqueue("slow")
        await asyncio.wait_for(started.wait(), 10)
        past = rt.clock.now() - timedelta(seconds=1)
        async with db.write_transaction() as conn:
            await conn.execute(
                update(jobs).where(jobs.c.id == job.id).values(lease_expires_at=past)
            )
        release.set()

        async def settled() -> bool:
            return not w.running and rt.metrics.lost_cas >= 1

        await eventually(settled)
        after = await rt.get(job.id)
        assert after is not None and after.status == JobStatus.RUNNING and after.result is None
        outcome = await recover_expired(db, RecoveryPolicy(backoff=0), rt.clock.now())
        assert outcome["failed"] == [job.id]
        final = await rt.get(job.id)
        assert final is not None and final.error_code == "LEASE_EXPIRED" and final.result is None
    finally:
        await rt.stop()


async def _insert_running(db: Database, **over: Any) -> int:
    rt = make_runtime(db)
    now = rt.clock.now()
    row = {
        "queue": "q",
        "kind": "k",
        "payload": {},
        "status": "running",
        "priority": 0,
        "run_at": now,
        "attempt": 1,
        "max_attempts": 3,
        "lease_owner": "gone",
        "lease_expires_at": None,
        "created_at": now,
        "updated_at": now,
    }
    row.update(over)
    async with db.write_transaction() as conn:
        return int((await conn.execute(insert(jobs).values(row).returning(jobs.c.id))).scalar_one())


async def test_recovery_takes_the_null_lease_branch_and_bounds_attempts(db: Database) -> None:
    now = make_runtime(db).clock.now()
    expired = now - timedelta(seconds=5)
    null_lease = await _insert_running(db, lease_expires_at=None, attempt=1)
    has_left = await _insert_running(db, lease_expires_at=expired, attempt=2)
    spent = await _insert_running(db, lease_expires_at=expired, attempt=3)
    alive = await _insert_running(db, lease_expires_at=now + timedelta(seconds=60))
    out = await recover_expired(db, RecoveryPolicy(backoff=0), now)
    assert sorted(out["requeued"]) == sorted([null_lease, has_left])
    assert out["failed"] == [spent]
    async with db.read_connection() as conn:
        rows = {r.id: r for r in await conn.execute(select(jobs))}
    assert rows[null_lease].status == "pending" and rows[has_left].status == "pending"
    assert rows[spent].status == "failed" and rows[spent].error_code == "LEASE_EXPIRED"
    assert rows[alive].status == "running"
    assert await recover_expired(db, RecoveryPolicy(backoff=0), now) == {}


async def test_cancel_pending_never_runs(db: Database) -> None:
    rt = make_runtime(db)
    ran = False

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> None:
        nonlocal ran
        ran = True

    async with rt:
        job = await rt.enqueue("k", run_at=60)
        cancelled = await rt.cancel(job.id)
        rt.worker(["q"])
        await asyncio.sleep(0.3)
    assert cancelled.status == JobStatus.CANCELLED and not ran


async def test_cancel_running_same_process_with_children(db: Database) -> None:
    rt = make_runtime(db)
    started = asyncio.Event()
    interrupted = asyncio.Event()

    @rt.handler("parent", queue="q")
    async def parent(ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            interrupted.set()
            raise

    rt.worker(["q"])
    async with rt:
        job = await rt.enqueue("parent")
        child = await rt.enqueue("child", queue="other", parent_id=job.id, run_at=60)
        grandchild = await rt.enqueue("child", queue="other", parent_id=child.id, run_at=60)
        await asyncio.wait_for(started.wait(), 10)
        await rt.cancel(job.id)
        await asyncio.wait_for(interrupted.wait(), 1.0)
        done = await rt.wait(job.id, timeout=5)
        kids = [await rt.get(child.id), await rt.get(grandchild.id)]
    assert done.status == JobStatus.CANCELLED
    assert [k.status for k in kids if k] == [JobStatus.CANCELLED, JobStatus.CANCELLED]


async def test_cancel_running_from_another_node(db_url: str) -> None:
    node_a = Runtime(db_url, settings=fast_settings())
    node_b = Runtime(db_url, settings=fast_settings(), migrate=False)
    started = asyncio.Event()

    @node_a.handler("long", queue="q")
    async def long(ctx: JobContext) -> None:
        started.set()
        await asyncio.sleep(60)

    node_a.worker(["q"])
    async with node_a:
        await node_b.start()
        try:
            job = await node_b.enqueue("long", queue="q")
            await asyncio.wait_for(started.wait(), 10)
            await node_b.cancel(job.id)
            hb = node_a.settings.job_heartbeat_interval_seconds
            done = await node_a.wait(job.id, timeout=hb * 3 + 1)
        finally:
            await node_b.stop()
    assert done.status == JobStatus.CANCELLED


async def test_success_after_cancel_is_refused(db: Database) -> None:
    rt = make_runtime(db)
    async with rt:
        job = await rt.enqueue("k", queue="q")
        now = rt.clock.now()
        async with db.write_transaction() as conn:
            [claimed] = await job_claim(conn, ["q"], 1, "me", now, 30)
        await rt.cancel(job.id)
        async with db.write_transaction() as conn:
            out = await jobs_complete(conn, "me", [(job.id, claimed.attempt, {"r": 1})], now)
        final = await rt.get(job.id)
    assert out == {job.id: "cancelled"}
    assert final is not None and final.status == JobStatus.CANCELLED and final.result is None


async def test_overdue_pending_job_never_starts(db: Database) -> None:
    rt = make_runtime(db)
    ran = False

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> None:
        nonlocal ran
        ran = True

    async with rt:
        job = await rt.enqueue("k", run_at=0.3, deadline=0.1)
        rt.worker(["q"])
        done = await rt.wait(job.id, timeout=10)
    assert not ran
    assert done.status == JobStatus.FAILED and done.error_code == "DEADLINE_EXCEEDED"
    assert done.attempt == 0


async def test_deadline_bounds_the_job_across_retries(db: Database) -> None:
    rt = make_runtime(db)
    runs: list[int] = []

    @rt.handler("k", queue="q", max_attempts=5, timeout=30)
    async def k(ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("transient")
        await asyncio.sleep(60)

    rt.worker(["q"])
    async with rt:
        job = await rt.enqueue("k", deadline=1.0)
        done = await rt.wait(job.id, timeout=10)
    assert runs == [1, 2]
    assert done.status == JobStatus.FAILED and done.error_code == "DEADLINE_EXCEEDED"


async def test_graceful_stop_hands_jobs_over_without_waiting_for_the_lease(db_url: str) -> None:
    settings = fast_settings(job_lease_seconds=30, job_heartbeat_interval_seconds=5)
    first = Runtime(db_url, settings=settings)
    first_started = asyncio.Event()

    @first.handler("long", queue="q")
    async def long_a(ctx: JobContext) -> None:
        first_started.set()
        await asyncio.sleep(60)

    first.worker(["q"])
    await first.start()
    job = await first.enqueue("long")
    await asyncio.wait_for(first_started.wait(), 10)
    await first.stop(grace=0.1)

    second = Runtime(db_url, settings=settings)

    @second.handler("long", queue="q")
    async def long_b(ctx: JobContext) -> str:
        return f"attempt {ctx.attempt}"

    second.worker(["q"])
    async with second:
        done = await second.wait(job.id, timeout=5)
    assert done.status == JobStatus.SUCCEEDED and done.result == "attempt 2"


async def test_retry_a_failed_job(db: Database) -> None:
    rt = make_runtime(db)
    ok = False

    @rt.handler("k", queue="q", max_attempts=1)
    async def k(ctx: JobContext) -> str:
        if not ok:
            raise RuntimeError("not yet")
        return "fine"

    rt.worker(["q"])
    async with rt:
        job = await rt.enqueue("k")
        assert (await rt.wait(job.id, timeout=10)).status == JobStatus.FAILED
        ok = True
        await rt.retry(job.id)
        assert (await rt.wait(job.id, timeout=10)).status == JobStatus.SUCCEEDED
        with pytest.raises(JobStateError):
            await rt.retry(job.id)


async def test_enqueue_many_and_worker_respects_concurrency(db: Database) -> None:
    rt = make_runtime(db)
    active = 0
    peak = 0

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(0.01)
        finally:  # a lost lease cancels the handler: it must not count as running on
            active -= 1

    rt.worker(["q"], concurrency=3)
    async with rt:
        created = await rt.enqueue_many([EnqueueSpec("k", {"i": i}) for i in range(40)])
        assert [j.payload["i"] for j in created] == list(range(40))
        for j in created:
            assert (await rt.wait(j.id, timeout=20)).status == JobStatus.SUCCEEDED
    assert peak == 3


async def test_events_follow_until_the_job_ends(db: Database) -> None:
    rt = make_runtime(db)
    go = asyncio.Event()

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> None:
        for i in range(3):
            await go.wait()
            await ctx.emit("step", {"i": i})

    rt.worker(["q"])
    async with rt:
        job = await rt.enqueue("k")
        seen: list[str] = []

        async def follow() -> None:
            async for ev in rt.events(job.id):
                seen.append(ev.type)

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.2)
        go.set()
        await asyncio.wait_for(follower, 10)
    assert seen == ["started", "step", "step", "step", "succeeded"]


async def test_on_success_hook_runs_in_the_finish_transaction(db: Database) -> None:
    rt = make_runtime(db)

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> None:
        async def record(conn: Any) -> None:
            await conn.execute(
                insert(job_events).values(
                    job_id=ctx.id, type="side_effect", created_at=ctx.clock.now()
                )
            )

        ctx.on_success(record)

    rt.worker(["q"])
    async with rt:
        job = await rt.enqueue("k")
        await rt.wait(job.id, timeout=10)
        types = [e.type async for e in rt.events(job.id)]
    assert types.count("side_effect") == 1


async def test_prune_removes_old_finished_jobs_in_batches(db: Database) -> None:
    from deckyard.jobs.maintenance import prune_finished

    rt = make_runtime(db)  # not started: its own prune loop must not race this test
    jobs_ = await rt.enqueue_many([EnqueueSpec("k", queue="q") for _ in range(5)])
    old = rt.clock.now() - timedelta(days=30)
    async with db.write_transaction() as conn:
        await conn.execute(
            update(jobs)
            .where(jobs.c.id.in_([j.id for j in jobs_[:4]]))
            .values(status="succeeded", finished_at=old)
        )
    await rt.emit(jobs_[0].id, "note")
    assert await prune_finished(db, rt.clock.now(), 3600, 3) == 3
    assert await prune_finished(db, rt.clock.now(), 3600, 3) == 1
    assert await prune_finished(db, rt.clock.now(), 3600, 3) == 0
    assert [j.id for j in await rt.list()] == [jobs_[4].id]


async def test_prune_hands_sqlite_back_between_batches(db: Database) -> None:
    """Full batches go on at once on PostgreSQL; on SQLite the next waits as long as the last
    took, so claims get the one writer in between."""
    rt = make_runtime(db, job_prune_batch_size=4)
    made = await rt.enqueue_many([EnqueueSpec("k", queue="q") for _ in range(9)])
    async with db.write_transaction() as conn:
        await conn.execute(
            update(jobs)
            .where(jobs.c.id.in_([j.id for j in made]))
            .values(status="succeeded", finished_at=rt.clock.now() - timedelta(days=30))
        )
    ticks = [await rt.maintenance.prune_tick() for _ in range(3)]
    assert rt.maintenance.metrics.pruned == 9
    assert [t.active for t in ticks] == [True, True, False]
    for full in ticks[:2]:
        if db.is_single_process:
            assert not full.more and full.due_in is not None and full.due_in > 0
        else:
            assert full.more
    assert await rt.list() == []


async def test_many_waiters_share_one_reader(db_url: str) -> None:
    from deckyard.db import current_loop
    from deckyard.db.migrate import upgrade

    db = Database(db_url, instrument=True)
    await upgrade(db)
    try:
        rt = make_runtime(db)

        @rt.handler("noop", queue="q")
        async def noop(ctx: JobContext) -> Any:
            await ctx.emit("progress", {"i": ctx.payload["i"]})
            return ctx.payload

        rt.worker(["q"], concurrency=1)
        async with rt:
            jobs_ = [await rt.enqueue("noop", {"i": i}) for i in range(40)]
            assert db.counter is not None
            db.counter.reset()
            token = current_loop.set("waiters")
            try:
                done = await asyncio.gather(*(rt.wait(j.id, timeout=60) for j in jobs_))
            finally:
                current_loop.reset(token)
            reads = db.counter.snapshot()["waiters"]["reads"]
        assert [d.result for d in done] == [{"i": i} for i in range(40)]
        assert all(d.status == JobStatus.SUCCEEDED for d in done)
        # one job at a time, 3 events each: a waiter re-reading its job on every wake made this
        # ~500 reads (quadratic in the waiters); one shared reader makes it ~150 (linear)
        assert reads <= 6 * len(jobs_), reads
        assert rt.waiters._futures == {}
    finally:
        await db.dispose()


async def test_wait_times_out_and_leaves_nothing_behind(db: Database) -> None:
    rt = make_runtime(db)
    async with rt:
        job = await rt.enqueue("never", {}, queue="nobody")
        with pytest.raises(TimeoutError):
            await rt.wait(job.id, timeout=0.2)
        with pytest.raises(JobNotFound):
            await rt.wait(10**9, timeout=5)
        assert rt.waiters._futures == {}
