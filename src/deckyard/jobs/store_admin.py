"""The jobs store, over many jobs: listing, counting, cancel trees, retry, recovery, pruning, ticks.

The other half of the store (`store` holds one job's path from enqueue to finish). Functions take
the caller's connection; the caller chooses the transaction (and its retry, see
`Database.write`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.jobs.models import Job
from deckyard.jobs.schema import JOB_COLUMNS, job_events, jobs, periodic_ticks
from deckyard.jobs.status import ACTIVE, TERMINAL, EventType, JobErrorCode, JobStatus
from deckyard.jobs.store import (
    RUNNING,
    WAKE_CANCEL,
    WAKE_JOBS,
    NewJob,
    events_append,
    job_enqueue,
)

# --- reads ------------------------------------------------------------------------------------


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
    system: bool = False,
) -> list[Job]:
    """Jobs matching the filters, newest first; `system`: only jobs of no workspace."""
    conds: list[ColumnElement[bool]] = []
    if system:
        conds.append(jobs.c.workspace_id.is_(None))
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


_FINISH_COLUMNS = tuple(c for c in JOB_COLUMNS if c.name not in ("payload", "result"))


async def jobs_finished_after(
    conn: AsyncConnection,
    after: tuple[datetime, int],
    workspace_ids: Sequence[str],
    *,
    exclude_queues: Sequence[str],
    limit: int,
) -> list[Job]:
    """Ended jobs of these workspaces past `after` (finished_at, id), oldest first (read only).

    Payload and result are not read (None). Uses `ix_jobs_status_finished`.
    """
    at, job_id = after
    stmt = (
        select(*_FINISH_COLUMNS)
        .where(
            jobs.c.status.in_(TERMINAL),
            jobs.c.finished_at >= at,
            or_(jobs.c.finished_at > at, jobs.c.id > job_id),
            jobs.c.workspace_id.in_(list(workspace_ids)),
            jobs.c.queue.not_in(list(exclude_queues)),
        )
        .order_by(jobs.c.finished_at, jobs.c.id)
        .limit(limit)
    )
    rows = (await conn.execute(stmt)).all()
    return [Job.from_row(r, payload=None, result=None) for r in rows]


async def jobs_depth(conn: AsyncConnection) -> dict[str, dict[str, int]]:
    """Active job counts per queue and status (read only)."""
    rows = await conn.execute(
        select(jobs.c.queue, jobs.c.status, func.count())
        .where(jobs.c.status.in_(ACTIVE))
        .group_by(jobs.c.queue, jobs.c.status)
    )
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(str(row[0]), {})[str(row[1])] = int(row[2])
    return out


async def jobs_count(conn: AsyncConnection) -> list[tuple[str, str, int]]:
    """(queue, status, count) over every job, finished ones included (read only)."""
    rows = await conn.execute(
        select(jobs.c.queue, jobs.c.status, func.count()).group_by(jobs.c.queue, jobs.c.status)
    )
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]


async def jobs_active_count(conn: AsyncConnection, kind: str, workspace_id: str) -> tuple[int, int]:
    """Active jobs of `kind`: (everyone's, this workspace's)."""
    row = (
        await conn.execute(
            select(
                func.count(),
                func.count().filter(jobs.c.workspace_id == workspace_id),
            ).where(jobs.c.kind == kind, jobs.c.status.in_(ACTIVE))
        )
    ).one()
    return int(row[0]), int(row[1])


async def job_cancel_flag(
    conn: AsyncConnection, job_id: int, *, lock: bool
) -> tuple[JobStatus, bool]:
    """The job's status and whether a cancel was requested; `lock` takes its row lock."""
    stmt = select(jobs.c.status, jobs.c.cancel_requested_at).where(jobs.c.id == job_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await conn.execute(stmt)).one()
    return JobStatus(row.status), row.cancel_requested_at is not None


async def jobs_active_descendants(conn: AsyncConnection, job_id: int) -> list[int]:
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


# --- cancel and retry -------------------------------------------------------------------------


async def jobs_cancel(
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
                jobs.c.status == RUNNING,
                jobs.c.cancel_requested_at.is_(None),
            )
            .values(cancel_requested_at=now, updated_at=now)
            .returning(jobs.c.id)
        )
    ]
    events = [(i, EventType.CANCELLED.value) for i in ended]
    events += [(i, EventType.CANCEL_REQUESTED.value) for i in requested]
    await events_append(db, conn, [(i, t, None) for i, t in events], now)
    if requested:
        db.notify(conn, WAKE_CANCEL)
    return ended, requested


@dataclass(frozen=True)
class Retried:
    """What `job_retry` did: `retried`, or why not (`status` as found, `dedupe_holder`)."""

    retried: bool
    status: JobStatus | None = None
    dedupe_holder: int | None = None


_other = jobs.alias("other")
_DEDUPE_HELD = exists().where(
    _other.c.queue == jobs.c.queue,
    _other.c.dedupe_key == jobs.c.dedupe_key,
    _other.c.status.in_(ACTIVE),
    _other.c.id != jobs.c.id,
)
"""Another active job of the same queue holds this job's dedupe key."""


async def job_retry(db: Database, conn: AsyncConnection, job_id: int, now: datetime) -> Retried:
    """Put a failed (or cancelled) job back to pending with a fresh attempt budget.

    Guarded on status and on its dedupe key: while another active job of the queue holds the
    key (enqueued after this one ended) nothing changes and the answer names that job, instead
    of the unique index refusing the write. On PostgreSQL an enqueue of the same key that
    commits between the guard's read and this write still hits the index (a narrow race).
    """
    rows = await conn.execute(
        update(jobs)
        .where(
            jobs.c.id == job_id,
            jobs.c.status.in_([JobStatus.FAILED.value, JobStatus.CANCELLED.value]),
            or_(jobs.c.dedupe_key.is_(None), ~_DEDUPE_HELD),
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
        .returning(jobs.c.id)
    )
    if rows.first() is not None:
        await events_append(db, conn, [(job_id, EventType.ENQUEUED.value, {"retry": True})], now)
        db.notify(conn, WAKE_JOBS)
        return Retried(True)
    found = (
        await conn.execute(
            select(jobs.c.status, jobs.c.queue, jobs.c.dedupe_key).where(jobs.c.id == job_id)
        )
    ).first()
    if found is None:
        return Retried(False)
    holder = None
    if found.dedupe_key is not None:
        holder = (
            await conn.execute(
                select(jobs.c.id).where(
                    jobs.c.queue == found.queue,
                    jobs.c.dedupe_key == found.dedupe_key,
                    jobs.c.status.in_(ACTIVE),
                    jobs.c.id != job_id,
                )
            )
        ).scalar()
    return Retried(False, JobStatus(found.status), holder)


# --- recovery ---------------------------------------------------------------------------------


def _expired(now: datetime) -> ColumnElement[bool]:
    """Running with no lease at all, or a lease that ran out (both branches matter)."""
    return and_(
        jobs.c.status == RUNNING,
        or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= now),
    )


@dataclass(frozen=True)
class RecoveryDue:
    """When recovery next has work: a lease running out, or a pending job's deadline."""

    lease_expiry: datetime | None
    """The earliest lease expiry among running jobs."""
    unleased: bool
    """Whether a running job has no lease at all (recover it now)."""
    pending_deadline: datetime | None
    """The earliest deadline among pending jobs."""


async def recovery_next_due(conn: AsyncConnection) -> RecoveryDue:
    """What `RecoveryDue` says, in one read."""
    running = jobs.c.status == RUNNING
    row = (
        await conn.execute(
            select(
                select(func.min(jobs.c.lease_expires_at)).where(running).scalar_subquery(),
                select(func.count())
                .where(running, jobs.c.lease_expires_at.is_(None))
                .scalar_subquery(),
                select(func.min(jobs.c.deadline_at))
                .where(jobs.c.status == JobStatus.PENDING.value, jobs.c.deadline_at.is_not(None))
                .scalar_subquery(),
            )
        )
    ).one()
    return RecoveryDue(row[0], bool(row[1]), row[2])


async def jobs_fail_pending_overdue(
    db: Database, conn: AsyncConnection, now: datetime, limit: int
) -> list[int]:
    """Fail up to `limit` pending jobs whose deadline passed (`DEADLINE_EXCEEDED`), unclaimed.

    Without this a pending job past its deadline would wait for a claim on its queue to end it
    (an external queue nobody polls, a queue with no worker). Guarded on still pending with a
    passed deadline; each gets the `failed` event a claim would have written.
    """
    overdue = and_(
        jobs.c.status == JobStatus.PENDING.value,
        jobs.c.deadline_at.is_not(None),
        jobs.c.deadline_at <= now,
    )
    picked = select(jobs.c.id).where(overdue).order_by(jobs.c.deadline_at).limit(limit)
    rows = await conn.execute(
        update(jobs)
        .where(jobs.c.id.in_(picked.scalar_subquery()), overdue)
        .values(
            status=JobStatus.FAILED.value,
            finished_at=now,
            updated_at=now,
            error_code=JobErrorCode.DEADLINE_EXCEEDED.value,
            error_message="deadline passed before the job could start",
        )
        .returning(jobs.c.id)
    )
    ids = [r.id for r in rows]
    data = {"error_code": JobErrorCode.DEADLINE_EXCEEDED.value}
    await events_append(db, conn, [(i, EventType.FAILED.value, data) for i in ids], now)
    return ids


async def jobs_expired(conn: AsyncConnection, now: datetime, limit: int) -> list[int]:
    """Ids of running jobs whose lease expired (or that have none), oldest first (read only)."""
    rows = await conn.execute(
        select(jobs.c.id).where(_expired(now)).order_by(jobs.c.id).limit(limit)
    )
    return [r.id for r in rows]


async def jobs_recover_expired(
    db: Database, conn: AsyncConnection, ids: Sequence[int], backoff: float, now: datetime
) -> dict[str, list[int]]:
    """Requeue or fail those of `ids` whose lease is still expired; returns the ids per outcome.

    A job with attempts left goes back to pending after `backoff` seconds; one whose attempts
    are spent fails with LEASE_EXPIRED; a cancel request or a passed deadline decides first.
    """
    base = and_(jobs.c.id.in_(ids), _expired(now))
    cancelled = jobs.c.cancel_requested_at.is_not(None)
    overdue = and_(jobs.c.deadline_at.is_not(None), jobs.c.deadline_at <= now)
    spent = jobs.c.attempt >= jobs.c.max_attempts
    terminal = {"lease_expires_at": None, "finished_at": now, "updated_at": now}
    plan: list[tuple[str, ColumnElement[bool], dict[str, Any]]] = [
        (
            "cancelled",
            cancelled,
            {"status": JobStatus.CANCELLED.value, "error_code": JobErrorCode.CANCELLED.value},
        ),
        (
            "deadline",
            overdue,
            {
                "status": JobStatus.FAILED.value,
                "error_code": JobErrorCode.DEADLINE_EXCEEDED.value,
                "error_message": "deadline passed before its worker finished",
            },
        ),
        (
            "failed",
            spent,
            {
                "status": JobStatus.FAILED.value,
                "error_code": JobErrorCode.LEASE_EXPIRED.value,
                "error_message": "lease expired and no attempts are left",
            },
        ),
    ]
    outcome: dict[str, list[int]] = {}
    for name, cond, values in plan:
        rows = await conn.execute(
            update(jobs).where(base, cond).values(**values, **terminal).returning(jobs.c.id)
        )
        outcome[name] = [r.id for r in rows]
    rows = await conn.execute(
        update(jobs)
        .where(base)
        .values(
            status=JobStatus.PENDING.value,
            run_at=now + timedelta(seconds=backoff),
            lease_expires_at=None,
            error_code=JobErrorCode.LEASE_EXPIRED.value,
            error_message="lease expired; requeued",
            updated_at=now,
        )
        .returning(jobs.c.id)
    )
    outcome["requeued"] = [r.id for r in rows]
    events = [
        (job_id, EventType.RECOVERED.value, {"outcome": name})
        for name, job_ids in outcome.items()
        for job_id in job_ids
    ]
    await events_append(db, conn, events, now)
    if outcome["requeued"]:
        db.notify(conn, WAKE_JOBS)
    return outcome


# --- pruning ----------------------------------------------------------------------------------


async def jobs_prunable(conn: AsyncConnection, cutoff: datetime, limit: int) -> list[int]:
    """Ids of up to `limit` jobs that finished before `cutoff`, oldest first (read only)."""
    rows = await conn.execute(
        select(jobs.c.id)
        .where(jobs.c.status.in_(TERMINAL), jobs.c.finished_at < cutoff)
        .order_by(jobs.c.finished_at)
        .limit(limit)
    )
    return [r.id for r in rows]


async def jobs_prune(conn: AsyncConnection, ids: Sequence[int]) -> int:
    """Delete these jobs (only those still finished) and their events; returns how many."""
    await conn.execute(delete(job_events).where(job_events.c.job_id.in_(ids)))
    result = await conn.execute(delete(jobs).where(jobs.c.id.in_(ids), jobs.c.status.in_(TERMINAL)))
    return int(result.rowcount)


# --- periodic ticks ---------------------------------------------------------------------------


async def periodic_tick_claim(
    db: Database, conn: AsyncConnection, name: str, tick: datetime, job: NewJob, now: datetime
) -> bool:
    """Enqueue `job` for periodic `name`'s `tick` unless some node already did; True if this did.

    The `job_periodic` row is a compare-and-set on the last enqueued tick: only one writer can
    move it forward, and the job is inserted in the same transaction.
    """
    moved = await conn.execute(
        update(periodic_ticks)
        .where(periodic_ticks.c.name == name, periodic_ticks.c.last_tick_at < tick)
        .values(last_tick_at=tick)
    )
    if moved.rowcount == 0:
        inserted = await conn.execute(
            db.insert_ignoring_conflicts(periodic_ticks, index_elements=["name"])
            .values(name=name, last_tick_at=tick)
            .returning(periodic_ticks.c.name)
        )
        if inserted.first() is None:
            return False
    await job_enqueue(db, conn, job, now)
    return True
