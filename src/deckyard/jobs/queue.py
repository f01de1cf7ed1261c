"""Statements that create, read, cancel and retry jobs (noun-first: `job_*`, `event_*`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.jobs.models import EVENT_COLUMNS, JOB_COLUMNS, Job, JobEvent
from deckyard.jobs.schema import ACTIVE_PREDICATE, job_events, jobs
from deckyard.jobs.status import ACTIVE, EventType, JobErrorCode, JobStatus

WAKE_JOBS = "jobs"
"""General job wakeups (recovery, retries, hand-overs): workers look before they claim."""


def wake_channel(queue: str) -> str:
    """The wakeup channel of one queue: new work on it, so its workers may claim at once."""
    return f"jobs:{queue}"


WAKE_CANCEL = "jobs.cancel"
WAKE_EVENTS = "jobs.events"
_BULK_CHUNK = 1000


@dataclass(frozen=True)
class NewJob:
    """Everything needed to insert one job."""

    kind: str
    queue: str
    payload: Any
    max_attempts: int
    run_at: datetime
    priority: int = 0
    dedupe_key: str | None = None
    deadline_at: datetime | None = None
    parent_id: int | None = None
    workspace_id: str | None = None

    def row(self, now: datetime) -> dict[str, Any]:
        """The column values for the insert."""
        return {
            "queue": self.queue,
            "kind": self.kind,
            "payload": self.payload if self.payload is not None else {},
            "status": JobStatus.PENDING.value,
            "priority": self.priority,
            "run_at": self.run_at,
            "attempt": 0,
            "max_attempts": self.max_attempts,
            "dedupe_key": self.dedupe_key,
            "deadline_at": self.deadline_at,
            "parent_id": self.parent_id,
            "workspace_id": self.workspace_id,
            "created_at": now,
            "updated_at": now,
        }


async def job_insert(
    db: Database, conn: AsyncConnection, new: NewJob, now: datetime
) -> tuple[Job, bool]:
    """Insert a job; on an active dedupe hit return the existing job. Returns (job, created)."""
    if new.dedupe_key is None:
        row = (await conn.execute(insert(jobs).values(new.row(now)).returning(*JOB_COLUMNS))).one()
        db.notify(conn, wake_channel(new.queue))
        return Job.from_row(row), True
    stmt = (
        db.insert_ignoring_conflicts(
            jobs,
            index_elements=["queue", "dedupe_key"],
            index_where=text(f"dedupe_key IS NOT NULL AND {ACTIVE_PREDICATE}"),
        )
        .values(new.row(now))
        .returning(*JOB_COLUMNS)
    )
    for _ in range(5):
        inserted = (await conn.execute(stmt)).first()
        if inserted is not None:
            db.notify(conn, wake_channel(new.queue))
            return Job.from_row(inserted), True
        existing = (
            await conn.execute(
                select(*JOB_COLUMNS).where(
                    jobs.c.queue == new.queue,
                    jobs.c.dedupe_key == new.dedupe_key,
                    jobs.c.status.in_(ACTIVE),
                )
            )
        ).first()
        if existing is not None:
            return Job.from_row(existing), False
    raise RuntimeError(f"dedupe key {new.dedupe_key!r} kept changing hands; giving up")


async def job_insert_many(
    db: Database, conn: AsyncConnection, items: Sequence[NewJob], now: datetime
) -> list[Job]:
    """Insert many jobs in bulk (those with dedupe keys one by one), in input order."""
    out: list[Job | None] = [None] * len(items)
    plain = [i for i, item in enumerate(items) if item.dedupe_key is None]
    stmt = insert(jobs).returning(*JOB_COLUMNS, sort_by_parameter_order=True)
    for start in range(0, len(plain), _BULK_CHUNK):
        chunk = plain[start : start + _BULK_CHUNK]
        rows = (await conn.execute(stmt, [items[i].row(now) for i in chunk])).all()
        for i, row in zip(chunk, rows, strict=True):
            out[i] = Job.from_row(row)
    for i, item in enumerate(items):
        if item.dedupe_key is not None:
            out[i], _ = await job_insert(db, conn, item, now)
    for queue in {item.queue for item in items}:
        db.notify(conn, wake_channel(queue))
    return [job for job in out if job is not None]


async def job_get(conn: AsyncConnection, job_id: int) -> Job | None:
    """One job by id."""
    row = (await conn.execute(select(*JOB_COLUMNS).where(jobs.c.id == job_id))).first()
    return Job.from_row(row) if row is not None else None


async def job_list(
    conn: AsyncConnection,
    *,
    queue: str | None = None,
    status: str | Sequence[str] | None = None,
    kind: str | None = None,
    workspace_id: str | None = None,
    parent_id: int | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[Job]:
    """Jobs matching the filters, newest first."""
    conds = []
    if queue is not None:
        conds.append(jobs.c.queue == queue)
    if status is not None:
        conds.append(jobs.c.status.in_([status] if isinstance(status, str) else list(status)))
    if kind is not None:
        conds.append(jobs.c.kind == kind)
    if workspace_id is not None:
        conds.append(jobs.c.workspace_id == workspace_id)
    if parent_id is not None:
        conds.append(jobs.c.parent_id == parent_id)
    if before_id is not None:
        conds.append(jobs.c.id < before_id)
    stmt = select(*JOB_COLUMNS).where(*conds).order_by(jobs.c.id.desc()).limit(limit)
    return [Job.from_row(r) for r in (await conn.execute(stmt)).all()]


async def job_active_descendants(conn: AsyncConnection, job_id: int) -> list[int]:
    """Ids of a job's active children, grandchildren and so on."""
    found: list[int] = []
    frontier = [job_id]
    while frontier:
        rows = await conn.execute(
            select(jobs.c.id).where(jobs.c.parent_id.in_(frontier), jobs.c.status.in_(ACTIVE))
        )
        frontier = [r.id for r in rows if r.id not in found]
        found.extend(frontier)
    return found


async def job_cancel(
    db: Database, conn: AsyncConnection, job_ids: Sequence[int], now: datetime
) -> tuple[list[int], list[int]]:
    """Cancel jobs: pending ones end now, running ones get `cancel_requested_at`.

    Returns (ended, requested). Both updates are guarded on status so a job that finished in
    the meantime is left alone.
    """
    ended = [
        r.id
        for r in await conn.execute(
            update(jobs)
            .where(jobs.c.id.in_(job_ids), jobs.c.status == JobStatus.PENDING.value)
            .values(
                status=JobStatus.CANCELLED.value,
                cancel_requested_at=now,
                finished_at=now,
                updated_at=now,
                error_code=JobErrorCode.CANCELLED.value,
                error_message="cancelled before it started",
            )
            .returning(jobs.c.id)
        )
    ]
    requested = [
        r.id
        for r in await conn.execute(
            update(jobs)
            .where(
                jobs.c.id.in_(job_ids),
                jobs.c.status == JobStatus.RUNNING.value,
                jobs.c.cancel_requested_at.is_(None),
            )
            .values(cancel_requested_at=now, updated_at=now)
            .returning(jobs.c.id)
        )
    ]
    events = [(i, EventType.CANCELLED.value) for i in ended]
    events += [(i, EventType.CANCEL_REQUESTED.value) for i in requested]
    await event_insert_many(db, conn, [(i, t, None) for i, t in events], now)
    if requested:
        db.notify(conn, WAKE_CANCEL)
    return ended, requested


async def job_retry(db: Database, conn: AsyncConnection, job_id: int, now: datetime) -> bool:
    """Put a failed (or cancelled) job back to pending with a fresh attempt budget."""
    result = await conn.execute(
        update(jobs)
        .where(
            jobs.c.id == job_id,
            jobs.c.status.in_([JobStatus.FAILED.value, JobStatus.CANCELLED.value]),
        )
        .values(
            status=JobStatus.PENDING.value,
            attempt=0,
            run_at=now,
            lease_owner=None,
            lease_expires_at=None,
            cancel_requested_at=None,
            finished_at=None,
            error_code=None,
            error_message=None,
            result=None,
            updated_at=now,
        )
    )
    if result.rowcount == 1:
        await event_insert_many(
            db, conn, [(job_id, EventType.ENQUEUED.value, {"retry": True})], now
        )
        db.notify(conn, WAKE_JOBS)
        return True
    return False


async def event_insert_many(
    db: Database,
    conn: AsyncConnection,
    events: Sequence[tuple[int, str, Any]],
    now: datetime,
) -> None:
    """Append events (job id, type, data) in one statement."""
    if not events:
        return
    await conn.execute(
        insert(job_events),
        [{"job_id": j, "type": t, "data": d, "created_at": now} for j, t, d in events],
    )
    db.notify(conn, WAKE_EVENTS)


async def events_after(
    conn: AsyncConnection, job_id: int, after_id: int, limit: int = 500
) -> list[JobEvent]:
    """A job's events with id greater than `after_id`, oldest first."""
    rows = await conn.execute(
        select(*EVENT_COLUMNS)
        .where(job_events.c.job_id == job_id, job_events.c.id > after_id)
        .order_by(job_events.c.id)
        .limit(limit)
    )
    return [JobEvent.from_row(r) for r in rows]


async def job_depths(conn: AsyncConnection) -> dict[str, dict[str, int]]:
    """Active job counts per queue and status (read only)."""
    from sqlalchemy import func

    rows = await conn.execute(
        select(jobs.c.queue, jobs.c.status, func.count())
        .where(jobs.c.status.in_(ACTIVE))
        .group_by(jobs.c.queue, jobs.c.status)
    )
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(str(row[0]), {})[str(row[1])] = int(row[2])
    return out
