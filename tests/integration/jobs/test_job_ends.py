"""How jobs end (issue 30): a success's error fields, retry against a held dedupe key, and a
pending job's deadline passing with nobody claiming, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from deckyard.clock import FakeClock
from deckyard.db import Database
from deckyard.jobs import (
    DedupeConflict,
    JobContext,
    JobStateError,
    JobStatus,
    Runtime,
)
from deckyard.loop import ACTIVE, IDLE
from tests.helpers.runtime import fast_settings


def make_runtime(db: Database, **over: Any) -> Runtime:
    return Runtime(db, settings=fast_settings(**over), migrate=False)


async def test_success_clears_the_error_of_earlier_attempts(db: Database) -> None:
    rt = make_runtime(db)

    @rt.handler("flaky", queue="q", max_attempts=3)
    async def flaky(ctx: JobContext) -> str:
        if ctx.attempt < 2:
            raise RuntimeError("boom")
        return "ok"

    @rt.handler("flaky_plain", queue="q", max_attempts=3)
    async def flaky_plain(ctx: JobContext) -> None:
        if ctx.attempt < 2:
            raise RuntimeError("boom")

    rt.worker(["q"])
    async with rt:
        with_result = await rt.enqueue("flaky")
        plain = await rt.enqueue("flaky_plain")
        done = [await rt.wait(j.id, timeout=10) for j in (with_result, plain)]
        retries = [
            [e.data async for e in rt.events(j.id, follow=False) if e.type == "retry_scheduled"]
            for j in (with_result, plain)
        ]
    for job, history in zip(done, retries, strict=True):
        assert job.status == JobStatus.SUCCEEDED and job.attempt == 2
        assert (job.error_code, job.error_message) == (None, None), job
        assert len(history) == 1 and "boom" in history[0]["message"]  # the history keeps it


async def test_fenced_complete_clears_the_error_too(db: Database) -> None:
    """The external workers' path (`jobs_complete`): fail once, then succeed."""
    clock = FakeClock()
    rt = Runtime(db, settings=fast_settings(), clock=clock, migrate=False)
    job = await rt.enqueue("k", queue="q", max_attempts=3, workspace_id="w")
    first = await rt.fenced.claim(["q"], "w", "a", 30)
    assert first is not None and first.attempt == 1
    failed = await rt.fenced.fail("a", job.id, 1, code="FLAKY", message="later", retryable=True)
    assert failed == JobStatus.PENDING
    clock.advance(5)
    second = await rt.fenced.claim(["q"], "w", "b", 30)
    assert second is not None and second.attempt == 2
    assert second.error_message == "later"  # while it runs again the last error still shows
    assert await rt.fenced.complete("b", job.id, 2, {"r": 1}) == JobStatus.SUCCEEDED
    final = await rt.get(job.id)
    history = [e.data async for e in rt.events(job.id, follow=False)]
    assert final is not None and final.result == {"r": 1}
    assert (final.error_code, final.error_message) == (None, None)
    assert {"attempt": 1, "error_code": "FLAKY", "message": "later"} in history


async def test_retry_is_refused_while_another_job_holds_the_dedupe_key(db: Database) -> None:
    rt = make_runtime(db)
    async with rt:
        first = await rt.enqueue("k", queue="q", dedupe_key="dk1", run_at=3600)
        await rt.cancel(first.id)
        second = await rt.enqueue("k", queue="q", dedupe_key="dk1", run_at=3600)
        assert second.id != first.id
        with pytest.raises(DedupeConflict) as refused:
            await rt.retry(first.id)
        assert refused.value.holder == second.id and str(second.id) in str(refused.value)
        assert isinstance(refused.value, JobStateError)
        unchanged = await rt.get(first.id)
        assert unchanged is not None and unchanged.status == JobStatus.CANCELLED

        await rt.cancel(second.id)  # the key is free again: the retry goes through
        retried = await rt.retry(first.id)
        assert retried.status == JobStatus.PENDING and retried.attempt == 0
        with pytest.raises(DedupeConflict) as held:
            await rt.retry(second.id)
        assert held.value.holder == first.id


async def test_pending_job_past_its_deadline_fails_without_a_claim(db_url: str) -> None:
    """The recovery loop ends it, waking at the deadline; before that it only reads."""
    settings = fast_settings(database_url=db_url, instrument_sql=True)
    clock = FakeClock()
    db = Database.from_settings(settings, url=db_url)
    rt = Runtime(db, settings=settings, clock=clock)
    try:
        await rt.start(run_loops=False)
        assert db.counter is not None
        db.counter.reset()
        assert await rt.maintenance.recovery_tick() == IDLE
        assert db.counter.total("writes") == 0  # nothing to do: no write at all

        job = await rt.enqueue("k", queue="ext.nobody", deadline=10, workspace_id="w")
        parked = await rt.enqueue("k", queue="ext.nobody", workspace_id="w")
        db.counter.reset()
        early = await rt.maintenance.recovery_tick()
        assert early.due_in == pytest.approx(10) and not early.active
        assert db.counter.total("writes") == 0
        assert (await rt.get(job.id)).status == JobStatus.PENDING  # type: ignore[union-attr]

        clock.advance(10.5)
        assert await rt.maintenance.recovery_tick() == ACTIVE
        ended = await rt.get(job.id)
        assert ended is not None and ended.status == JobStatus.FAILED
        assert ended.error_code == "DEADLINE_EXCEEDED" and ended.attempt == 0
        assert ended.finished_at == clock.now()
        types = [e.type async for e in rt.events(job.id, follow=False)]
        assert types == ["failed"]
        assert (await rt.get(parked.id)).status == JobStatus.PENDING  # type: ignore[union-attr]
        assert rt.metrics.recoveries["deadline_pending"] == 1

        db.counter.reset()
        assert await rt.maintenance.recovery_tick() == IDLE  # only a job with no deadline left
        assert db.counter.total("writes") == 0
    finally:
        await rt.stop()
        await db.dispose()
