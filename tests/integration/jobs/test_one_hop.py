"""The one-hop hot path on both databases: settle + claim + events as one write, the hand-off.

`jobs_settle_claim` must do exactly what the general settle and claim do (the same guards, the
same rows, the same events), in one statement on PostgreSQL and one synchronous call on SQLite
(on the loop's thread or the database thread); `Database.write_in_thread` must roll back what a
failing function wrote.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, select, text, update

from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.jobs.models import Job
from deckyard.jobs.schema import jobs
from deckyard.jobs.store import (
    WAKE_EVENTS,
    NewJob,
    events_after,
    job_get,
    job_hand_off,
    jobs_enqueue,
    jobs_settle_claim,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OWNER = "test:1:abc"


def _new(**kw: object) -> NewJob:
    base: dict[str, object] = {
        "kind": "k",
        "queue": "q",
        "payload": {"n": 1},
        "max_attempts": 3,
        "run_at": NOW,
    }
    return NewJob(**{**base, **kw})  # type: ignore[arg-type]


async def _events(db: Database, job_id: int) -> list[tuple[str, object]]:
    async with db.read_connection() as conn:
        return [(e.type, e.data) for e in await events_after(conn, job_id, 0)]


async def test_settle_claim_guards_and_events(db: Database) -> None:
    later = NOW + timedelta(seconds=1)
    items = [_new(priority=p) for p in (3, 1, 2)] + [_new(deadline_at=NOW - timedelta(seconds=1))]
    async with db.write_transaction() as conn:
        a, b, c, overdue = await jobs_enqueue(db, conn, items, NOW)
    woken = db.bus.subscribe(WAKE_EVENTS)

    settled, claimed = await jobs_settle_claim(db, OWNER, [], ["q"], 10, NOW, 30)
    assert settled == {}
    # priority order, the overdue one (priority 0) first and failed without running
    assert [j.id for j in claimed] == [overdue.id, b.id, c.id, a.id]
    assert [j.status.value for j in claimed] == ["failed", "running", "running", "running"]
    assert [j.attempt for j in claimed[1:]] == [1, 1, 1]
    assert all(j.lease_owner == OWNER for j in claimed)
    assert claimed[1].lease_expires_at == NOW + timedelta(seconds=30)
    assert WAKE_EVENTS in woken.take_hits()
    gone = await _get(db, overdue.id)
    assert (gone.status.value, gone.attempt, gone.error_code) == ("failed", 0, "DEADLINE_EXCEEDED")
    assert gone.lease_expires_at is None and gone.finished_at == NOW
    assert await _events(db, overdue.id) == [("failed", {"error_code": "DEADLINE_EXCEEDED"})]
    assert await _events(db, b.id) == [("started", {"attempt": 1})]

    async with db.write_transaction() as conn:
        await conn.execute(update(jobs).where(jobs.c.id == c.id).values(cancel_requested_at=NOW))
    done = [(b.id, 1, {"ok": True}), (c.id, 1, {"dropped": 1}), (a.id, 2, None)]
    settled, claimed = await jobs_settle_claim(db, OWNER, done, ["q"], 5, later, 30)
    assert claimed == []
    # a: wrong attempt, so the CAS is lost and a stays running
    assert settled == {b.id: "succeeded", c.id: "cancelled"}
    rb, rc, ra = await _get(db, b.id), await _get(db, c.id), await _get(db, a.id)
    assert (rb.status.value, rb.result, rb.finished_at, rb.lease_expires_at) == (
        "succeeded",
        {"ok": True},
        later,
        None,
    )
    assert (rc.status.value, rc.result, rc.error_code) == ("cancelled", None, "CANCELLED")
    assert (ra.status.value, ra.attempt) == ("running", 1)
    assert (await _events(db, b.id))[-1] == ("succeeded", {"attempt": 1})
    assert (await _events(db, c.id))[-1] == (
        "cancelled",
        {"attempt": 1, "discarded_result": True},
    )
    assert (await _events(db, a.id))[-1] == ("cas_lost", {"attempt": 2})

    # another owner, or an expired lease, cannot finish a
    settled, _ = await jobs_settle_claim(db, "other", [(a.id, 1, None)], ["q"], 0, later, 30)
    assert settled == {}
    expired = NOW + timedelta(seconds=31)
    settled, _ = await jobs_settle_claim(db, OWNER, [(a.id, 1, None)], ["q"], 0, expired, 30)
    assert settled == {}
    settled, _ = await jobs_settle_claim(db, OWNER, [(a.id, 1, None)], ["q"], 0, later, 30)
    assert settled == {a.id: "succeeded"}


async def test_claim_skips_spent_future_and_other_queues(db: Database) -> None:
    async with db.write_transaction() as conn:
        spent, _future, _other, due = await jobs_enqueue(
            db,
            conn,
            [
                _new(max_attempts=1),
                _new(run_at=NOW + timedelta(seconds=5)),
                _new(queue="elsewhere"),
                _new(),
            ],
            NOW,
        )
        await conn.execute(update(jobs).where(jobs.c.id == spent.id).values(attempt=1))
    _, claimed = await jobs_settle_claim(db, OWNER, [], ["q"], 10, NOW, 30)
    assert [j.id for j in claimed] == [due.id]


async def test_hand_off_inserts_a_running_job_with_its_event(db: Database) -> None:
    woken = db.bus.subscribe(WAKE_EVENTS)
    job = await job_hand_off(db, _new(payload={"x": [1, 2]}), NOW, OWNER, 30)
    assert (job.status.value, job.attempt, job.lease_owner) == ("running", 1, OWNER)
    assert job.payload == {"x": [1, 2]} and job.started_at == NOW
    assert job.lease_expires_at == NOW + timedelta(seconds=30)
    assert await _get(db, job.id) == job
    assert await _events(db, job.id) == [("started", {"attempt": 1})]
    assert WAKE_EVENTS in woken.take_hits()
    with pytest.raises(ValueError, match="dedupe"):
        await job_hand_off(db, _new(dedupe_key="d"), NOW, OWNER, 30)


@pytest.mark.parametrize("inline", [True, False], ids=["loop-thread", "db-thread"])
async def test_write_in_thread_rolls_back_on_error(tmp_path: Path, inline: bool) -> None:
    db = Database(f"sqlite:///{tmp_path / 'one.db'}", sqlite_inline_writes=inline)
    await upgrade(db)

    def fail(conn: Connection) -> None:
        conn.execute(text("UPDATE jobs SET status = 'x'"))
        raise RuntimeError("boom")

    try:
        async with db.write_transaction() as tx:
            await jobs_enqueue(db, tx, [_new()], NOW)
        with pytest.raises(RuntimeError):
            await db.write_in_thread(fail)
        async with db.read_connection() as conn:
            assert (await conn.execute(select(jobs.c.status))).scalar() == "pending"
        assert await db.write_in_thread(lambda conn: 7) == 7
    finally:
        await db.dispose()


async def _get(db: Database, job_id: int) -> Job:
    async with db.read_connection() as conn:
        job = await job_get(conn, job_id)
    assert job is not None
    return job


async def test_inline_write_waits_for_another_connections_lock_off_the_loop(
    tmp_path: Path,
) -> None:
    """A second `Database` on the file holds the write lock: the inline write waits for it on the
    database thread (the loop keeps running, so the holder can commit), then runs."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    a, b = Database(url, busy_timeout_seconds=30), Database(url)
    await upgrade(a)
    try:
        async with b.write_transaction() as tx:
            await jobs_enqueue(b, tx, [_new()], NOW)
            waiting: asyncio.Task[int] = asyncio.create_task(
                a.write_in_thread(lambda conn: conn.execute(select(jobs.c.id)).scalar_one())
            )
            for _ in range(20):
                await asyncio.sleep(0)
            assert not waiting.done()
            await tx.execute(update(jobs).values(priority=5))
        job_id = await waiting
        async with a.read_connection() as conn:
            assert (await conn.execute(select(jobs.c.priority))).scalar() == 5
        assert isinstance(job_id, int)
    finally:
        await a.dispose()
        await b.dispose()
