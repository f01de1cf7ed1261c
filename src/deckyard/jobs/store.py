"""The jobs store, one job's path: enqueue, claim, heartbeat, finish, release, and its events.

Together with `store_admin` (listing, cancel, retry, recovery, pruning, periodic ticks, counts)
this is the only code that touches the `jobs`, `job_events` and `job_periodic` tables. Names are
noun-first (`job_*`, `jobs_*`, `lease_*`, `events_*`), so every statement is found by prefix.

Every state change is guarded in its `WHERE` clause (still running, same owner, same attempt,
lease not expired) and its caller looks at what the statement returned.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    case,
    func,
    insert,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import NOTIFY_CHANNEL_SQL, Database, PgStatement, UTCDateTime
from deckyard.jobs.actor import current_actor
from deckyard.jobs.models import Job, JobEvent
from deckyard.jobs.schema import EVENT_COLUMNS, JOB_COLUMNS, job_events, jobs
from deckyard.jobs.status import (
    ACTIVE,
    ACTIVE_PREDICATE,
    TERMINAL,
    EventType,
    JobErrorCode,
    JobStatus,
)

WAKE_JOBS = "jobs"
"""General job wakeups (recovery, retries, hand-overs): workers look before they claim."""
WAKE_CANCEL = "jobs.cancel"
WAKE_EVENTS = "jobs.events"
RUNNING = JobStatus.RUNNING.value
PENDING = JobStatus.PENDING.value
_BULK_CHUNK = 1000


def wake_channel(queue: str) -> str:
    """The wakeup channel of one queue: new work on it, so its workers may claim at once."""
    return f"jobs:{queue}"


# --- enqueue ----------------------------------------------------------------------------------


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
    actor_token_id: int | None = field(default_factory=current_actor.get)

    def row(self, now: datetime) -> dict[str, Any]:
        """The column values for the insert."""
        return {
            "queue": self.queue,
            "kind": self.kind,
            "payload": self.payload if self.payload is not None else {},
            "status": PENDING,
            "priority": self.priority,
            "run_at": self.run_at,
            "attempt": 0,
            "max_attempts": self.max_attempts,
            "dedupe_key": self.dedupe_key,
            "deadline_at": self.deadline_at,
            "parent_id": self.parent_id,
            "workspace_id": self.workspace_id,
            "actor_token_id": self.actor_token_id,
            "created_at": now,
            "updated_at": now,
        }


async def job_enqueue(
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


async def job_enqueue_claimed(
    db: Database,
    conn: AsyncConnection,
    new: NewJob,
    now: datetime,
    owner: str,
    lease: float,
) -> Job:
    """Insert a due job already claimed by `owner` (attempt 1, leased), with its `started` event.

    The in-process hand-off: the enqueuer's own worker has a free slot, so the job needs no
    wakeup and no second transaction to be claimed. No dedupe key (a dedupe hit returns an
    existing job, which is not this worker's to claim).
    """
    row = _claimed_row(new, now, owner, lease)
    job = Job.from_row((await conn.execute(insert(jobs).values(row).returning(*JOB_COLUMNS))).one())
    await events_append(db, conn, [(job.id, "started", {"attempt": 1})], now)
    return job


def _claimed_row(new: NewJob, now: datetime, owner: str, lease: float) -> dict[str, Any]:
    if new.dedupe_key is not None:
        raise ValueError("job_enqueue_claimed takes no dedupe key")
    return {
        **new.row(now),
        "status": RUNNING,
        "attempt": 1,
        "lease_owner": owner,
        "lease_expires_at": now + timedelta(seconds=lease),
        "started_at": now,
    }


async def job_hand_off(db: Database, new: NewJob, now: datetime, owner: str, lease: float) -> Job:
    """`job_enqueue_claimed` as a write of its own, in one hop, from statements built once.

    PostgreSQL: one statement (the job's INSERT, its `started` event and the events NOTIFY as
    data-modifying CTEs) in autocommit. SQLite: one synchronous call (`write_in_thread`).
    Building the statement per call cost more CPU than running it (about 2 ms of SQLAlchemy
    column proxies for the CTE on PostgreSQL), so both are prepared at import.
    """
    row = _claimed_row(new, now, owner, lease)
    assert tuple(row) == _CLAIMED_KEYS
    if db.has_db_thread:

        def insert_claimed(conn: Connection) -> Job:
            job = Job.from_row(conn.execute(_INSERT_CLAIMED, row).one())
            conn.execute(_STARTED_EVENT, {"job_id": job.id, "data": {"attempt": 1}, "now": now})
            db.notify(conn, WAKE_EVENTS)
            return job

        return await db.write_in_thread(insert_claimed)
    row["payload"] = json.dumps(row["payload"])
    rows = await db.write_statement(_HAND_OFF, row, wake=(WAKE_EVENTS,))
    return _job_of(rows[0])


_CLAIMED_KEYS = (
    *("queue", "kind", "payload", "status", "priority", "run_at", "attempt", "max_attempts"),
    *("dedupe_key", "deadline_at", "parent_id", "workspace_id", "actor_token_id"),
    *("created_at", "updated_at", "lease_owner", "lease_expires_at", "started_at"),
)
"""The columns `_claimed_row` fills, in a fixed order."""
_JOB_NAMES = ", ".join(c.name for c in JOB_COLUMNS)
_INSERT_CLAIMED = (
    insert(jobs).values({k: bindparam(k, type_=jobs.c[k].type) for k in _CLAIMED_KEYS})
).returning(*JOB_COLUMNS)
"""SQLite's hand-off INSERT, built once."""
_VALUE = {"payload": "CAST(:payload AS jsonb)"}
_HAND_OFF_PG = f"""
WITH inserted AS (
    INSERT INTO jobs ({", ".join(_CLAIMED_KEYS)})
    VALUES ({", ".join(_VALUE.get(k, f":{k}") for k in _CLAIMED_KEYS)})
    RETURNING {_JOB_NAMES}
),
event AS (
    INSERT INTO job_events (job_id, type, data, created_at)
    SELECT id, :started, jsonb_build_object('attempt', 1), :created_at FROM inserted
    RETURNING id
)
SELECT inserted.*, (SELECT pg_notify({NOTIFY_CHANNEL_SQL}, :wake)) AS notified FROM inserted
"""
_HAND_OFF = PgStatement.named(_HAND_OFF_PG, started=EventType.STARTED.value, wake=WAKE_EVENTS)
"""PostgreSQL's hand-off: one statement, built once."""


async def job_enqueue_alone(db: Database, new: NewJob, now: datetime) -> Job:
    """A plain enqueue (no dedupe key) as a write of its own, in one hop.

    PostgreSQL: one statement (the INSERT and the queue's NOTIFY) in autocommit, on
    `write_statement`'s psycopg connections: one round trip instead of BEGIN, INSERT, NOTIFY
    and COMMIT through SQLAlchemy. SQLite: one synchronous call (`write_in_thread`).
    """
    if new.dedupe_key is not None:
        raise ValueError("job_enqueue_alone takes no dedupe key")
    row = new.row(now)
    assert tuple(row) == _NEW_KEYS
    channel = wake_channel(new.queue)
    if db.has_db_thread:

        def insert_new(conn: Connection) -> Job:
            job = Job.from_row(conn.execute(_INSERT_NEW, row).one())
            db.notify(conn, channel)
            return job

        return await db.write_in_thread(insert_new)
    row["payload"] = json.dumps(row["payload"])
    rows = await db.write_statement(_ENQUEUE, {**row, "wake": channel}, wake=(channel,))
    return _job_of(rows[0])


_NEW_KEYS = (
    *("queue", "kind", "payload", "status", "priority", "run_at", "attempt", "max_attempts"),
    *("dedupe_key", "deadline_at", "parent_id", "workspace_id", "actor_token_id"),
    *("created_at", "updated_at"),
)
"""The columns `NewJob.row` fills, in its order."""
_INSERT_NEW = (
    insert(jobs).values({k: bindparam(k, type_=jobs.c[k].type) for k in _NEW_KEYS})
).returning(*JOB_COLUMNS)
_ENQUEUE = PgStatement.named(f"""
WITH inserted AS (
    INSERT INTO jobs ({", ".join(_NEW_KEYS)})
    VALUES ({", ".join(_VALUE.get(k, f":{k}") for k in _NEW_KEYS)})
    RETURNING {_JOB_NAMES}
)
SELECT inserted.*, (SELECT pg_notify({NOTIFY_CHANNEL_SQL}, :wake)) AS notified FROM inserted
""")
"""PostgreSQL's plain enqueue: one statement, built once."""


_STARTED_EVENT = insert(job_events).values(
    job_id=bindparam("job_id"),
    type=EventType.STARTED.value,
    data=bindparam("data", type_=job_events.c.data.type),
    created_at=bindparam("now", type_=job_events.c.created_at.type),
)


async def jobs_enqueue(
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
            out[i], _ = await job_enqueue(db, conn, item, now)
    for queue in {item.queue for item in items}:
        db.notify(conn, wake_channel(queue))
    return [job for job in out if job is not None]


_JOB_COLUMNS_BUT_PAYLOAD = tuple(c for c in JOB_COLUMNS if c.name != "payload")


async def job_get(conn: AsyncConnection, job_id: int, *, payload: bool = True) -> Job | None:
    """One job by id; without `payload` its payload is not read (None), for callers that
    need its owner, state or result (a payload can hold a whole page)."""
    columns = JOB_COLUMNS if payload else _JOB_COLUMNS_BUT_PAYLOAD
    row = (await conn.execute(select(*columns).where(jobs.c.id == job_id))).first()
    if row is None:
        return None
    return Job.from_row(row) if payload else Job.from_row(row, payload=None)


async def jobs_status(conn: AsyncConnection, job_ids: Sequence[int]) -> dict[int, str]:
    """The status of each of `job_ids` that names a job (no payload or result is read)."""
    found = await conn.execute(select(jobs.c.id, jobs.c.status).where(jobs.c.id.in_(job_ids)))
    return {int(r.id): str(r.status) for r in found}


async def jobs_get_terminal(
    conn: AsyncConnection, job_ids: Sequence[int]
) -> tuple[dict[int, Job], set[int]]:
    """Of `job_ids`, the jobs that are terminal (by id), and the ids no job has."""
    statuses = await jobs_status(conn, job_ids)
    done_ids = [i for i, status in statuses.items() if status in TERMINAL]
    done: dict[int, Job] = {}
    if done_ids:
        rows = await conn.execute(select(*JOB_COLUMNS).where(jobs.c.id.in_(done_ids)))
        done = {job.id: job for job in map(Job.from_row, rows)}
    return done, set(job_ids) - set(statuses)


# --- events -----------------------------------------------------------------------------------


async def events_append(
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


async def events_after_many(
    conn: AsyncConnection, job_ids: Sequence[int], after_id: int, limit: int
) -> list[JobEvent]:
    """The events of any of `job_ids` with id greater than `after_id`, oldest first."""
    rows = await conn.execute(
        select(*EVENT_COLUMNS)
        .where(job_events.c.job_id.in_(job_ids), job_events.c.id > after_id)
        .order_by(job_events.c.id)
        .limit(limit)
    )
    return [JobEvent.from_row(r) for r in rows]


# --- claim ------------------------------------------------------------------------------------


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


async def jobs_fail_overdue(conn: AsyncConnection, claimed: Sequence[Job], now: datetime) -> None:
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


# --- heartbeat --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Beat:
    """What a heartbeat learned: which leases were extended and which of those must stop."""

    extended: set[int]
    cancel_requested: set[int]


def _lease_until(until: datetime) -> ColumnElement[Any]:
    """`until`, or the job's deadline when that comes first: a fenced lease never outlives it."""
    return case(
        (and_(jobs.c.deadline_at.is_not(None), jobs.c.deadline_at < until), jobs.c.deadline_at),
        else_=until,
    )


async def lease_extend(
    conn: AsyncConnection,
    owner: str,
    held: Sequence[tuple[int, int]],
    now: datetime,
    lease: float,
    *,
    to_deadline: bool = False,
) -> Beat:
    """Extend every unexpired lease this owner holds among `held` (id, attempt), in one UPDATE.

    With `to_deadline` (leases of workers outside the process) no lease is extended past the
    job's deadline, and one whose deadline passed is not extended at all: the lease then runs
    out at the deadline and recovery fails the job `DEADLINE_EXCEEDED`. In-process workers time
    their handler out at the deadline themselves and must still hold the lease to report it.
    """
    until = now + timedelta(seconds=lease)
    conds = [
        tuple_(jobs.c.id, jobs.c.attempt).in_(held),
        jobs.c.status == RUNNING,
        jobs.c.lease_owner == owner,
        jobs.c.lease_expires_at > now,
    ]
    if to_deadline:
        conds.append(or_(jobs.c.deadline_at.is_(None), jobs.c.deadline_at > now))
    rows = await conn.execute(
        update(jobs)
        .where(*conds)
        .values(lease_expires_at=_lease_until(until) if to_deadline else until, updated_at=now)
        .returning(jobs.c.id, jobs.c.cancel_requested_at)
    )
    extended: set[int] = set()
    cancel: set[int] = set()
    for r in rows:
        extended.add(r.id)
        if r.cancel_requested_at is not None:
            cancel.add(r.id)
    return Beat(extended, cancel)


async def jobs_cancel_requested(conn: AsyncConnection, ids: Sequence[int]) -> set[int]:
    """Which of these jobs have a cancel request (read only)."""
    rows = await conn.execute(
        select(jobs.c.id).where(jobs.c.id.in_(ids), jobs.c.cancel_requested_at.is_not(None))
    )
    return {r.id for r in rows}


# --- finish -----------------------------------------------------------------------------------


def _held(owner: Any, now: Any) -> ColumnElement[bool]:
    return and_(
        jobs.c.status == RUNNING,
        jobs.c.lease_owner == owner,
        jobs.c.lease_expires_at > now,
    )


CANCELLED_RESULT = "cancelled while it ran; its result was discarded"
DEADLINE_RESULT = "the deadline passed before the result came; it was discarded"


def _success_values(now: Any, result: Any) -> dict[str, Any]:
    """A success's columns: a success clears the error of earlier attempts (their events keep
    it); a cancel request or a passed deadline refuses the result instead."""
    cancelled = jobs.c.cancel_requested_at.is_not(None)
    overdue = and_(jobs.c.deadline_at.is_not(None), jobs.c.deadline_at <= now)
    refused = or_(cancelled, overdue)
    return {
        "status": case(
            (cancelled, JobStatus.CANCELLED.value),
            (overdue, JobStatus.FAILED.value),
            else_=JobStatus.SUCCEEDED.value,
        ),
        "result": case((refused, None), else_=result) if result is not None else None,
        "error_code": case(
            (cancelled, JobErrorCode.CANCELLED.value),
            (refused, JobErrorCode.DEADLINE_EXCEEDED.value),
            else_=None,
        ),
        "error_message": case(
            (cancelled, CANCELLED_RESULT),
            (refused, DEADLINE_RESULT),
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


async def jobs_complete(
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


async def jobs_release(
    conn: AsyncConnection, owner: str, held: Sequence[tuple[int, int]], now: datetime
) -> list[int]:
    """Hand running jobs back at shutdown so another worker can take them at once.

    A job whose attempts are spent fails instead (`max_attempts` bounds executions, ever).
    """
    if not held:
        return []
    cancelled = jobs.c.cancel_requested_at.is_not(None)
    spent = jobs.c.attempt >= jobs.c.max_attempts
    rows = await conn.execute(
        update(jobs)
        .where(tuple_(jobs.c.id, jobs.c.attempt).in_(held), _held(owner, now))
        .values(
            status=case(
                (cancelled, JobStatus.CANCELLED.value),
                (spent, JobStatus.FAILED.value),
                else_=PENDING,
            ),
            error_code=case(
                (cancelled, JobErrorCode.CANCELLED.value),
                (spent, JobErrorCode.LEASE_LOST.value),
                else_=jobs.c.error_code,
            ),
            finished_at=case((cancelled, now), (spent, now), else_=None),
            run_at=now,
            lease_expires_at=None,
            updated_at=now,
        )
        .returning(jobs.c.id)
    )
    return [r.id for r in rows]


async def jobs_unclaim(
    conn: AsyncConnection, owner: str, held: Sequence[tuple[int, int]], now: datetime
) -> list[int]:
    """Hand back claimed jobs that never started (a worker's prefetch buffer at stop).

    Their attempt is given back too: the claim counted one that never ran. Guarded like every
    finish: same owner, same attempt, lease unexpired.
    """
    if not held:
        return []
    rows = await conn.execute(
        update(jobs)
        .where(tuple_(jobs.c.id, jobs.c.attempt).in_(held), _held(owner, now))
        .values(
            status=PENDING,
            attempt=jobs.c.attempt - 1,
            run_at=now,
            lease_owner=None,
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
    """`job_claim` restricted to one workspace's jobs (for workers outside the process).

    The lease ends at the job's deadline when that comes first (see `lease_extend`).
    """
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
                lease_expires_at=_lease_until(now + timedelta(seconds=lease)),
                attempt=jobs.c.attempt + 1,
                started_at=now,
                updated_at=now,
            )
            .returning(*JOB_COLUMNS)
        )
    ).all()
    return sorted((Job.from_row(r) for r in rows), key=lambda j: (j.priority, j.run_at, j.id))


# --- settle and claim in one go -----------------------------------------------------------------


Settled = tuple[int, int, Any]
"""A success to record: (job id, attempt, result)."""


async def jobs_settle_claim(
    db: Database,
    owner: str,
    done: Sequence[Settled],
    queues: Sequence[str],
    limit: int,
    now: datetime,
    lease: float,
) -> tuple[dict[int, str], list[Job]]:
    """Record successes and claim up to `limit` jobs, with their events, as one write.

    The hot path of a worker: what `jobs_complete`, `job_claim`, `jobs_fail_overdue` and
    `events_append` do in one transaction, with the same guards (finish CAS on owner, attempt
    and lease; `SKIP LOCKED` claim), in the fewest hops the database allows:

    - PostgreSQL: one statement (data-modifying CTEs, its NOTIFY inside), in autocommit: one
      round trip instead of BEGIN, three statements, NOTIFY and COMMIT.
    - SQLite: one call on the database thread (`BEGIN IMMEDIATE` to `COMMIT`).

    Returns id -> new status for the successes recorded (a missing id lost its lease) and the
    claimed jobs, in claim order; a claimed job whose deadline had passed comes back failed,
    not running. Events: the terminal status (or `cas_lost`) per success, `started` per claim.
    """
    if db.supports_writable_ctes:
        return await _settle_claim_statement(db, owner, done, queues, limit, now, lease)
    if db.has_db_thread:
        return await db.write_in_thread(
            lambda conn: _settle_claim_sync(db, conn, owner, done, queues, limit, now, lease)
        )
    raise RuntimeError("jobs_settle_claim needs writable CTEs or a database thread")


def _claim_order(job: Job) -> tuple[int, datetime, int]:
    return (job.priority, job.run_at, job.id)


def _success_event(job_id: int, attempt: int, status: str | None) -> tuple[int, str, Any]:
    """The event of one recorded success (the same as the worker's for a general settle)."""
    if status is None:
        return (job_id, EventType.CAS_LOST.value, {"attempt": attempt})
    if status != JobStatus.SUCCEEDED.value:
        return (job_id, status, {"attempt": attempt, "discarded_result": True})
    return (job_id, status, {"attempt": attempt})


def _claim_events(claimed: Sequence[Job], now: datetime) -> list[tuple[int, str, Any]]:
    return [
        (j.id, EventType.FAILED.value, {"error_code": JobErrorCode.DEADLINE_EXCEEDED.value})
        if j.deadline_at is not None and j.deadline_at <= now
        else (j.id, EventType.STARTED.value, {"attempt": j.attempt})
        for j in claimed
    ]


def _settle_claim_sync(
    db: Database,
    conn: Connection,
    owner: str,
    done: Sequence[Settled],
    queues: Sequence[str],
    limit: int,
    now: datetime,
    lease: float,
) -> tuple[dict[int, str], list[Job]]:
    """SQLite, on the database thread: the statements of `jobs_settle_claim`, synchronously."""
    statuses: dict[int, str] = {}
    plain = [(i, a) for i, a, r in done if r is None]
    if plain:
        rows = conn.execute(_COMPLETE_PLAIN, {"pairs": plain, "owner": owner, "now": now})
        statuses.update({r.id: r.status for r in rows})
    for job_id, attempt, result in done:
        if result is not None:
            params = {
                "job_id": job_id,
                "b_attempt": attempt,
                "owner": owner,
                "now": now,
                "b_result": result,
            }
            row = conn.execute(_COMPLETE_ONE, params).first()
            if row is not None:
                statuses[row.id] = row.status
    claimed: list[Job] = []
    if limit > 0:
        params = {
            "queues": list(queues),
            "now": now,
            "n": limit,
            "owner": owner,
            "until": now + timedelta(seconds=lease),
        }
        claimed = sorted((Job.from_row(r) for r in conn.execute(_CLAIM, params)), key=_claim_order)
    overdue = [j.id for j in claimed if j.deadline_at is not None and j.deadline_at <= now]
    if overdue:
        conn.execute(_FAIL_OVERDUE, {"ids": overdue, "now": now})
        claimed = [
            dataclasses.replace(j, status=JobStatus.FAILED) if j.id in overdue else j
            for j in claimed
        ]
    events = [_success_event(i, a, statuses.get(i)) for i, a, _ in done]
    events += _claim_events(claimed, now)
    if events:
        conn.execute(
            insert(job_events),
            [{"job_id": j, "type": t, "data": d, "created_at": now} for j, t, d in events],
        )
        db.notify(conn, WAKE_EVENTS)
    return statuses, claimed


_FAIL_OVERDUE = (
    update(jobs)
    .where(jobs.c.id.in_(bindparam("ids", expanding=True)), jobs.c.status == RUNNING)
    .values(
        status=JobStatus.FAILED.value,
        attempt=jobs.c.attempt - 1,
        lease_expires_at=None,
        finished_at=bindparam("now", type_=jobs.c.finished_at.type),
        updated_at=bindparam("now", type_=jobs.c.updated_at.type),
        error_code=JobErrorCode.DEADLINE_EXCEEDED.value,
        error_message="deadline passed before the job could start",
    )
)

_SETTLE_CLAIM_PG = f"""
WITH input AS (
    SELECT * FROM unnest(
        CAST(:ids AS bigint[]), CAST(:attempts AS integer[]), CAST(:results AS jsonb[])
    ) AS i(id, attempt, result)
),
done AS (
    UPDATE jobs SET
        status = CASE
            WHEN jobs.cancel_requested_at IS NOT NULL THEN :cancelled
            WHEN jobs.deadline_at IS NOT NULL AND jobs.deadline_at <= :now THEN :failed
            ELSE :succeeded END,
        result = CASE
            WHEN jobs.cancel_requested_at IS NOT NULL
                OR (jobs.deadline_at IS NOT NULL AND jobs.deadline_at <= :now) THEN NULL
            ELSE input.result END,
        error_code = CASE
            WHEN jobs.cancel_requested_at IS NOT NULL THEN :e_cancelled
            WHEN jobs.deadline_at IS NOT NULL AND jobs.deadline_at <= :now THEN :e_deadline
            ELSE NULL END,
        error_message = CASE
            WHEN jobs.cancel_requested_at IS NOT NULL THEN :m_cancelled
            WHEN jobs.deadline_at IS NOT NULL AND jobs.deadline_at <= :now THEN :m_deadline
            ELSE NULL END,
        lease_expires_at = NULL,
        finished_at = :now,
        updated_at = :now
    FROM input
    WHERE jobs.id = input.id AND jobs.attempt = input.attempt
        AND jobs.status = :running AND jobs.lease_owner = :owner AND jobs.lease_expires_at > :now
    RETURNING jobs.id, jobs.status
),
claimed AS (
    UPDATE jobs SET
        status = CASE WHEN deadline_at IS NOT NULL AND deadline_at <= :now
            THEN :failed ELSE :running END,
        lease_owner = :owner,
        lease_expires_at = CASE WHEN deadline_at IS NOT NULL AND deadline_at <= :now
            THEN NULL ELSE CAST(:until AS timestamptz) END,
        attempt = CASE WHEN deadline_at IS NOT NULL AND deadline_at <= :now
            THEN attempt ELSE attempt + 1 END,
        finished_at = CASE WHEN deadline_at IS NOT NULL AND deadline_at <= :now
            THEN CAST(:now AS timestamptz) ELSE NULL END,
        error_code = CASE WHEN deadline_at IS NOT NULL AND deadline_at <= :now
            THEN :e_deadline ELSE error_code END,
        error_message = CASE WHEN deadline_at IS NOT NULL AND deadline_at <= :now
            THEN 'deadline passed before the job could start' ELSE error_message END,
        started_at = :now,
        updated_at = :now
    WHERE id IN (
        SELECT id FROM jobs
        WHERE status = :pending AND {{queue_match}} AND run_at <= :now
            AND attempt < max_attempts
        ORDER BY priority, run_at, id
        LIMIT :n
        FOR UPDATE SKIP LOCKED
    )
    RETURNING {_JOB_NAMES}
),
ev AS (
    INSERT INTO job_events (job_id, type, data, created_at)
    SELECT input.id, COALESCE(done.status, :cas_lost),
        CASE WHEN done.status IS NULL OR done.status = :succeeded
            THEN jsonb_build_object('attempt', input.attempt)
            ELSE jsonb_build_object('attempt', input.attempt, 'discarded_result', true) END,
        :now
    FROM input LEFT JOIN done ON done.id = input.id
    UNION ALL
    SELECT claimed.id,
        CASE WHEN claimed.status = :failed THEN :failed ELSE :started END,
        CASE WHEN claimed.status = :failed
            THEN jsonb_build_object('error_code', CAST(:e_deadline AS text))
            ELSE jsonb_build_object('attempt', claimed.attempt) END,
        :now
    FROM claimed
    RETURNING job_id
),
head AS (
    SELECT
        (SELECT COALESCE(json_agg(json_build_array(done.id, done.status)), '[]') FROM done)
            AS settled,
        (SELECT count(*) FROM (
            SELECT pg_notify({NOTIFY_CHANNEL_SQL}, :payload) WHERE EXISTS (SELECT 1 FROM ev)
        ) AS n) AS notified
)
SELECT CASE WHEN row_number() OVER () = 1 THEN head.settled END AS settled,
    head.notified, claimed.*
FROM head LEFT JOIN claimed ON true
"""
# `settled` comes once, on the first row, not parsed again on every claimed row.
# A worker of one queue matches it with `=`: with `= ANY(array)` PostgreSQL cannot walk the
# pending index in claim order and sorts every pending row of the table instead (bench/
# queue_scale: 0.37 of the empty table's claim rate with 100,000 pending, 1.14 with `=`).
_SETTLE_CLAIM_NAMES = dict(
    running=RUNNING,
    pending=PENDING,
    succeeded=JobStatus.SUCCEEDED.value,
    failed=JobStatus.FAILED.value,
    cancelled=JobStatus.CANCELLED.value,
    e_cancelled=JobErrorCode.CANCELLED.value,
    e_deadline=JobErrorCode.DEADLINE_EXCEEDED.value,
    m_cancelled=CANCELLED_RESULT,
    m_deadline=DEADLINE_RESULT,
    cas_lost=EventType.CAS_LOST.value,
    started=EventType.STARTED.value,
    payload=WAKE_EVENTS,
)
_SETTLE_CLAIM_ONE = PgStatement.named(
    _SETTLE_CLAIM_PG.replace("{queue_match}", "queue = :queue"), **_SETTLE_CLAIM_NAMES
)
_SETTLE_CLAIM_ANY = PgStatement.named(
    _SETTLE_CLAIM_PG.replace("{queue_match}", "queue = ANY(CAST(:queues AS text[]))"),
    **_SETTLE_CLAIM_NAMES,
)
"""PostgreSQL's `jobs_settle_claim` for one queue and for several: each built once."""


async def _settle_claim_statement(
    db: Database,
    owner: str,
    done: Sequence[Settled],
    queues: Sequence[str],
    limit: int,
    now: datetime,
    lease: float,
) -> tuple[dict[int, str], list[Job]]:
    params = {
        "ids": [i for i, _, _ in done],
        "attempts": [a for _, a, _ in done],
        "results": [None if r is None else json.dumps(r) for _, _, r in done],
        "n": limit,
        "owner": owner,
        "now": now,
        "until": now + timedelta(seconds=lease),
    }
    if len(queues) == 1:
        statement, params["queue"] = _SETTLE_CLAIM_ONE, queues[0]
    else:
        statement, params["queues"] = _SETTLE_CLAIM_ANY, list(queues)
    rows = await db.write_statement(statement, params, wake=(WAKE_EVENTS,))
    settled = next(r["settled"] for r in rows if r["settled"] is not None)
    statuses = {int(i): str(status) for i, status in settled}
    claimed = sorted((_job_of(r) for r in rows if r["id"] is not None), key=_claim_order)
    return statuses, claimed


def _job_of(row: Mapping[str, Any]) -> Job:
    """A Job from a `write_statement` row holding every `jobs` column (others are left out)."""
    values = {name: row[name] for name in _JOB_KEYS}
    values["status"] = JobStatus(values["status"])
    for name in _JOB_TIMES:
        if values[name] is not None:
            values[name] = values[name].astimezone(UTC)
    return Job(**values)


_JOB_KEYS = tuple(c.name for c in JOB_COLUMNS)
_JOB_TIMES = tuple(c.name for c in JOB_COLUMNS if isinstance(c.type, UTCDateTime))
