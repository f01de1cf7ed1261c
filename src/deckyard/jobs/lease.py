"""Leases: claiming jobs, extending leases in batch, and settling attempts by compare-and-set.

Every state change here is guarded in its `WHERE` clause (still running, same owner, same
attempt, lease not expired) and its caller looks at what the statement returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, case, func, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.jobs.models import JOB_COLUMNS, Job
from deckyard.jobs.schema import jobs
from deckyard.jobs.status import JobErrorCode, JobStatus

RUNNING = JobStatus.RUNNING.value
PENDING = JobStatus.PENDING.value


async def job_next_due(conn: AsyncConnection, queues: Sequence[str]) -> datetime | None:
    """When the earliest pending job on `queues` becomes due (read only; None if none)."""
    stmt = select(func.min(jobs.c.run_at)).where(jobs.c.status == PENDING, jobs.c.queue.in_(queues))
    value: datetime | None = (await conn.execute(stmt)).scalar()
    return value


_CLAIM = (
    update(jobs)
    .where(
        jobs.c.id.in_(
            select(jobs.c.id)
            .where(
                jobs.c.status == PENDING,
                jobs.c.queue.in_(bindparam("queues", expanding=True)),
                jobs.c.run_at <= bindparam("now", type_=jobs.c.run_at.type),
                jobs.c.attempt < jobs.c.max_attempts,
            )
            .order_by(jobs.c.priority, jobs.c.run_at, jobs.c.id)
            .limit(bindparam("n"))
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
    )
    .values(
        status=RUNNING,
        lease_owner=bindparam("owner"),
        lease_expires_at=bindparam("until", type_=jobs.c.lease_expires_at.type),
        attempt=jobs.c.attempt + 1,
        started_at=bindparam("now", type_=jobs.c.started_at.type),
        updated_at=bindparam("now", type_=jobs.c.updated_at.type),
    )
    .returning(*JOB_COLUMNS)
)
"""Built once: claiming is the hottest statement, and building it costs more than running it."""


async def job_claim(
    conn: AsyncConnection,
    queues: Sequence[str],
    limit: int,
    owner: str,
    now: datetime,
    lease: float,
) -> list[Job]:
    """Claim up to `limit` due jobs in one statement; sets owner, lease and attempt + 1.

    PostgreSQL skips rows other claimers hold (`FOR UPDATE SKIP LOCKED`); SQLite needs no row
    locks because the caller's `BEGIN IMMEDIATE` holds the only writer lock.
    """
    params = {
        "queues": list(queues),
        "now": now,
        "n": limit,
        "owner": owner,
        "until": now + timedelta(seconds=lease),
    }
    rows = (await conn.execute(_CLAIM, params)).all()
    return sorted((Job.from_row(r) for r in rows), key=lambda j: (j.priority, j.run_at, j.id))


async def job_fail_overdue(conn: AsyncConnection, claimed: Sequence[Job], now: datetime) -> None:
    """Fail just-claimed jobs whose deadline already passed, without running them."""
    ids = [j.id for j in claimed]
    await conn.execute(
        update(jobs)
        .where(jobs.c.id.in_(ids), jobs.c.status == RUNNING)
        .values(
            status=JobStatus.FAILED.value,
            attempt=jobs.c.attempt - 1,
            lease_expires_at=None,
            finished_at=now,
            updated_at=now,
            error_code=JobErrorCode.DEADLINE_EXCEEDED.value,
            error_message="deadline passed before the job could start",
        )
    )


@dataclass(frozen=True)
class Beat:
    """What a heartbeat learned: which leases were extended and which of those must stop."""

    extended: set[int]
    cancel_requested: set[int]


async def lease_extend(
    conn: AsyncConnection,
    owner: str,
    held: Sequence[tuple[int, int]],
    now: datetime,
    lease: float,
) -> Beat:
    """Extend every unexpired lease this owner holds among `held` (id, attempt), in one UPDATE."""
    rows = await conn.execute(
        update(jobs)
        .where(
            tuple_(jobs.c.id, jobs.c.attempt).in_(held),
            jobs.c.status == RUNNING,
            jobs.c.lease_owner == owner,
            jobs.c.lease_expires_at > now,
        )
        .values(lease_expires_at=now + timedelta(seconds=lease), updated_at=now)
        .returning(jobs.c.id, jobs.c.cancel_requested_at)
    )
    extended: set[int] = set()
    cancel: set[int] = set()
    for r in rows:
        extended.add(r.id)
        if r.cancel_requested_at is not None:
            cancel.add(r.id)
    return Beat(extended, cancel)


async def job_cancel_requested(conn: AsyncConnection, ids: Sequence[int]) -> set[int]:
    """Which of these jobs have a cancel request (read only)."""
    rows = await conn.execute(
        select(jobs.c.id).where(jobs.c.id.in_(ids), jobs.c.cancel_requested_at.is_not(None))
    )
    return {r.id for r in rows}


def _held(owner: Any, now: Any) -> ColumnElement[bool]:
    return and_(
        jobs.c.status == RUNNING,
        jobs.c.lease_owner == owner,
        jobs.c.lease_expires_at > now,
    )


def _success_status(now: Any) -> Any:
    return case(
        (jobs.c.cancel_requested_at.is_not(None), JobStatus.CANCELLED.value),
        (
            and_(jobs.c.deadline_at.is_not(None), jobs.c.deadline_at <= now),
            JobStatus.FAILED.value,
        ),
        else_=JobStatus.SUCCEEDED.value,
    )


def _success_values(now: Any, result: Any) -> dict[str, Any]:
    refused = or_(
        jobs.c.cancel_requested_at.is_not(None),
        and_(jobs.c.deadline_at.is_not(None), jobs.c.deadline_at <= now),
    )
    return {
        "status": _success_status(now),
        "result": case((refused, None), else_=result) if result is not None else None,
        "error_code": case(
            (jobs.c.cancel_requested_at.is_not(None), JobErrorCode.CANCELLED.value),
            (refused, JobErrorCode.DEADLINE_EXCEEDED.value),
            else_=None,
        ),
        "lease_expires_at": None,
        "finished_at": now,
        "updated_at": now,
    }


def _success_update(where: ColumnElement[bool], now: Any, result: Any) -> Any:
    return (
        update(jobs)
        .where(where, _held(bindparam("owner"), now))
        .values(_success_values(now, result))
        .returning(jobs.c.id, jobs.c.status)
    )


_NOW = bindparam("now", type_=jobs.c.updated_at.type)
_COMPLETE_PLAIN = _success_update(
    tuple_(jobs.c.id, jobs.c.attempt).in_(bindparam("pairs", expanding=True)), _NOW, None
)
_COMPLETE_ONE = _success_update(
    and_(jobs.c.id == bindparam("job_id"), jobs.c.attempt == bindparam("b_attempt")),
    _NOW,
    bindparam("b_result", type_=jobs.c.result.type),
)


async def job_complete_many(
    conn: AsyncConnection,
    owner: str,
    done: Sequence[tuple[int, int, Any]],
    now: datetime,
) -> dict[int, str]:
    """Record successes (id, attempt, result) by compare-and-set; returns id -> new status.

    A job missing from the answer lost its lease (expired, even if not yet recovered, or taken
    over). A job answered `cancelled` or `failed` had a cancel request or a passed deadline:
    its result was discarded.
    """
    out: dict[int, str] = {}
    no_result = [(i, a) for i, a, r in done if r is None]
    if no_result:
        rows = await conn.execute(_COMPLETE_PLAIN, {"pairs": no_result, "owner": owner, "now": now})
        out.update({r.id: r.status for r in rows})
    for job_id, attempt, result in done:
        if result is None:
            continue
        params = {
            "job_id": job_id,
            "b_attempt": attempt,
            "owner": owner,
            "now": now,
            "b_result": result,
        }
        row = (await conn.execute(_COMPLETE_ONE, params)).first()
        if row is not None:
            out[row.id] = row.status
    return out


async def job_fail(
    conn: AsyncConnection,
    owner: str,
    job: Job,
    now: datetime,
    *,
    code: str,
    message: str,
    retry_at: datetime | None,
) -> str | None:
    """Record a failed attempt: back to pending at `retry_at`, or failed; cancelled if asked.

    Returns the new status, or None when the lease was already lost.
    """
    retrying = retry_at is not None
    status = case(
        (jobs.c.cancel_requested_at.is_not(None), JobStatus.CANCELLED.value),
        else_=PENDING if retrying else JobStatus.FAILED.value,
    )
    terminal = case((jobs.c.cancel_requested_at.is_not(None), now), else_=None if retrying else now)
    row = (
        await conn.execute(
            update(jobs)
            .where(jobs.c.id == job.id, jobs.c.attempt == job.attempt, _held(owner, now))
            .values(
                status=status,
                run_at=retry_at or jobs.c.run_at,
                lease_expires_at=None,
                error_code=code,
                error_message=message[:4000],
                finished_at=terminal,
                updated_at=now,
            )
            .returning(jobs.c.status)
        )
    ).first()
    return None if row is None else str(row.status)


async def job_release(
    conn: AsyncConnection, owner: str, held: Sequence[tuple[int, int]], now: datetime
) -> list[int]:
    """Hand running jobs back at shutdown so another worker can take them at once.

    A job whose attempts are spent fails instead (`max_attempts` bounds executions, ever).
    """
    if not held:
        return []
    spent = jobs.c.attempt >= jobs.c.max_attempts
    rows = await conn.execute(
        update(jobs)
        .where(tuple_(jobs.c.id, jobs.c.attempt).in_(held), _held(owner, now))
        .values(
            status=case(
                (jobs.c.cancel_requested_at.is_not(None), JobStatus.CANCELLED.value),
                (spent, JobStatus.FAILED.value),
                else_=PENDING,
            ),
            error_code=case(
                (jobs.c.cancel_requested_at.is_not(None), JobErrorCode.CANCELLED.value),
                (spent, JobErrorCode.LEASE_LOST.value),
                else_=jobs.c.error_code,
            ),
            finished_at=case(
                (jobs.c.cancel_requested_at.is_not(None), now), (spent, now), else_=None
            ),
            run_at=now,
            lease_expires_at=None,
            updated_at=now,
        )
        .returning(jobs.c.id)
    )
    return [r.id for r in rows]


async def job_next_due_in_workspace(
    conn: AsyncConnection, queues: Sequence[str], workspace_id: str
) -> datetime | None:
    """When the earliest pending job of one workspace on `queues` becomes due (read only)."""
    stmt = select(func.min(jobs.c.run_at)).where(
        jobs.c.status == PENDING, jobs.c.queue.in_(queues), jobs.c.workspace_id == workspace_id
    )
    value: datetime | None = (await conn.execute(stmt)).scalar()
    return value


async def job_claim_in_workspace(
    conn: AsyncConnection,
    queues: Sequence[str],
    workspace_id: str,
    limit: int,
    owner: str,
    now: datetime,
    lease: float,
) -> list[Job]:
    """`job_claim` restricted to one workspace's jobs (for workers outside the process)."""
    picked = (
        select(jobs.c.id)
        .where(
            jobs.c.status == PENDING,
            jobs.c.queue.in_(list(queues)),
            jobs.c.workspace_id == workspace_id,
            jobs.c.run_at <= now,
            jobs.c.attempt < jobs.c.max_attempts,
        )
        .order_by(jobs.c.priority, jobs.c.run_at, jobs.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    rows = (
        await conn.execute(
            update(jobs)
            .where(jobs.c.id.in_(picked))
            .values(
                status=RUNNING,
                lease_owner=owner,
                lease_expires_at=now + timedelta(seconds=lease),
                attempt=jobs.c.attempt + 1,
                started_at=now,
                updated_at=now,
            )
            .returning(*JOB_COLUMNS)
        )
    ).all()
    return sorted((Job.from_row(r) for r in rows), key=lambda j: (j.priority, j.run_at, j.id))
