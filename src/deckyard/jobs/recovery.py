"""`recover_expired`: the one recovery policy for every queue."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, or_, select, update

from deckyard.db import Database
from deckyard.jobs.policy import RecoveryPolicy
from deckyard.jobs.queue import WAKE_JOBS, event_insert_many
from deckyard.jobs.schema import jobs
from deckyard.jobs.status import EventType, JobErrorCode, JobStatus

log = logging.getLogger(__name__)
RUNNING = JobStatus.RUNNING.value


def _expired(now: datetime) -> ColumnElement[bool]:
    """Running with no lease at all, or a lease that ran out (both branches matter)."""
    return and_(
        jobs.c.status == RUNNING,
        or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= now),
    )


async def lease_next_expiry(db: Database) -> tuple[datetime | None, bool]:
    """(earliest lease expiry among running jobs, whether a running job has no lease at all)."""
    async with db.read_connection() as conn:
        row = (
            await conn.execute(
                select(
                    func.min(jobs.c.lease_expires_at),
                    func.count().filter(jobs.c.lease_expires_at.is_(None)),
                ).where(jobs.c.status == RUNNING)
            )
        ).one()
    return row[0], bool(row[1])


async def recover_expired(
    db: Database, policy: RecoveryPolicy, now: datetime
) -> dict[str, list[int]]:
    """Requeue or fail every running job whose lease expired (or that has none).

    A job with attempts left goes back to pending after `policy.backoff`; one whose attempts
    are spent fails with LEASE_EXPIRED; a cancel request or a passed deadline decides first.
    Reads first and writes only when something expired. Returns the ids per outcome.
    """
    async with db.read_connection() as conn:
        candidates = (
            await conn.execute(
                select(jobs.c.id).where(_expired(now)).order_by(jobs.c.id).limit(policy.batch_size)
            )
        ).all()
    if not candidates:
        return {}
    ids = [r.id for r in candidates]
    base = and_(jobs.c.id.in_(ids), _expired(now))
    cancelled = jobs.c.cancel_requested_at.is_not(None)
    overdue = and_(jobs.c.deadline_at.is_not(None), jobs.c.deadline_at <= now)
    spent = jobs.c.attempt >= jobs.c.max_attempts
    terminal = {"lease_expires_at": None, "finished_at": now, "updated_at": now}
    plan = [
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
                "error_message": "deadline passed while its worker was gone",
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
    async with db.write_transaction() as conn:
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
                run_at=now + timedelta(seconds=policy.backoff),
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
        await event_insert_many(db, conn, events, now)
        if outcome["requeued"]:
            db.notify(conn, WAKE_JOBS)
    for name, job_ids in outcome.items():
        if job_ids:
            log.warning("recovered %d expired job(s) as %s: %s", len(job_ids), name, job_ids[:20])
    return outcome
