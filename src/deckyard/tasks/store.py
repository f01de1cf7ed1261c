"""The tasks store: every statement on the `tasks` and `task_events` tables (noun-first names).

Functions take the caller's connection; state changes are guarded in their `WHERE` clause
(still resumable, still at this stage) and return whether they applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.tasks.schema import task_events, tasks
from deckyard.tasks.status import RESUMABLE, TaskStatus

WAKE_TASKS = "tasks.events"
"""Bus channel woken whenever a task event is written."""


async def task_insert(
    conn: AsyncConnection,
    kind: str,
    params: dict[str, Any],
    workspace_id: str | None,
    now: datetime,
    *,
    owner: str | None = None,
    lease: float = 0.0,
    actor_token_id: int | None = None,
) -> int:
    """Insert a pending task at stage 0 (leased to `owner` when given); returns its id."""
    result = await conn.execute(
        insert(tasks)
        .values(
            kind=kind,
            status=TaskStatus.PENDING.value,
            stage=0,
            workspace_id=workspace_id,
            params=params,
            state={},
            created_at=now,
            updated_at=now,
            owner=owner,
            lease_expires_at=now + timedelta(seconds=lease) if owner else None,
            actor_token_id=actor_token_id,
        )
        .returning(tasks.c.id)
    )
    return int(result.scalar_one())


async def task_get(conn: AsyncConnection, task_id: int) -> dict[str, Any] | None:
    """A task row as a dict, or None."""
    row = (await conn.execute(select(tasks).where(tasks.c.id == task_id))).first()
    return dict(row._mapping) if row else None


async def task_list(
    conn: AsyncConnection, workspace_id: str, *, status: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """A workspace's tasks (optionally of one status), newest first."""
    stmt = select(tasks).where(tasks.c.workspace_id == workspace_id)
    if status:
        stmt = stmt.where(tasks.c.status == status)
    rows = await conn.execute(stmt.order_by(tasks.c.id.desc()).limit(limit))
    return [dict(r._mapping) for r in rows]


async def task_stage_lock(conn: AsyncConnection, task_id: int) -> tuple[int, dict[str, Any]]:
    """The task's stage index and state, with its row locked until the transaction ends."""
    row = (
        await conn.execute(
            select(tasks.c.stage, tasks.c.state).where(tasks.c.id == task_id).with_for_update()
        )
    ).one()
    return int(row.stage), dict(row.state or {})


async def task_start(conn: AsyncConnection, task_id: int, now: datetime) -> bool:
    """Move a pending task to running; True when it was pending."""
    result = await conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id, tasks.c.status == TaskStatus.PENDING.value)
        .values(status=TaskStatus.RUNNING.value, updated_at=now)
    )
    return bool(result.rowcount)


async def task_state_set(
    conn: AsyncConnection, task_id: int, state: dict[str, Any], now: datetime
) -> None:
    """Store a task's state (the caller holds its row lock, see `task_stage_lock`)."""
    await conn.execute(
        update(tasks).where(tasks.c.id == task_id).values(state=state, updated_at=now)
    )


async def task_stage_advance(
    conn: AsyncConnection, task_id: int, index: int, state: dict[str, Any], now: datetime
) -> bool:
    """Move a running task from stage `index` to the next, by compare-and-set on the index."""
    result = await conn.execute(
        update(tasks)
        .where(
            tasks.c.id == task_id,
            tasks.c.stage == index,
            tasks.c.status == TaskStatus.RUNNING.value,
        )
        .values(stage=index + 1, state=state, updated_at=now)
    )
    return bool(result.rowcount)


async def task_finish(
    conn: AsyncConnection, task_id: int, status: TaskStatus, now: datetime, **values: Any
) -> bool:
    """End a task that is not over yet with `status` (and `result`/`error_*` values)."""
    result = await conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id, tasks.c.status.in_(RESUMABLE))
        .values(
            status=status.value,
            finished_at=now,
            updated_at=now,
            owner=None,
            lease_expires_at=None,
            **values,
        )
    )
    return bool(result.rowcount)


# --- leases: which process drives a task ------------------------------------------------------


async def task_lease_claim(
    conn: AsyncConnection, task_id: int, owner: str, now: datetime, lease: float
) -> bool:
    """Lease a resumable task to `owner`, by compare-and-set: only when nobody holds it, `owner`
    already does, or the holder's lease lapsed. True when `owner` now drives it."""
    result = await conn.execute(
        update(tasks)
        .where(
            tasks.c.id == task_id,
            tasks.c.status.in_(RESUMABLE),
            or_(
                tasks.c.owner.is_(None),
                tasks.c.owner == owner,
                tasks.c.lease_expires_at.is_(None),
                tasks.c.lease_expires_at <= now,
            ),
        )
        .values(owner=owner, lease_expires_at=now + timedelta(seconds=lease))
    )
    return bool(result.rowcount)


async def tasks_lease_extend(
    conn: AsyncConnection, owner: str, ids: Sequence[int], now: datetime, lease: float
) -> set[int]:
    """Extend `owner`'s unexpired leases on `ids` in one UPDATE; returns the ids extended."""
    rows = await conn.execute(
        update(tasks)
        .where(
            tasks.c.id.in_(list(ids)),
            tasks.c.status.in_(RESUMABLE),
            tasks.c.owner == owner,
            tasks.c.lease_expires_at > now,
        )
        .values(lease_expires_at=now + timedelta(seconds=lease))
        .returning(tasks.c.id)
    )
    return {int(r.id) for r in rows}


async def tasks_lease_release(conn: AsyncConnection, owner: str, ids: Sequence[int]) -> None:
    """Hand `owner`'s leases on `ids` back (a graceful stop), so another process resumes them."""
    await conn.execute(
        update(tasks)
        .where(tasks.c.id.in_(list(ids)), tasks.c.owner == owner)
        .values(owner=None, lease_expires_at=None)
    )


async def tasks_orphaned(
    conn: AsyncConnection, now: datetime, limit: int
) -> tuple[list[int], datetime | None]:
    """Resumable tasks nobody drives (no owner, or the owner's lease lapsed), oldest first, and
    the earliest lease still running (when the next one may lapse). Read only."""
    free = or_(
        tasks.c.owner.is_(None),
        tasks.c.lease_expires_at.is_(None),
        tasks.c.lease_expires_at <= now,
    )
    rows = await conn.execute(
        select(tasks.c.id)
        .where(tasks.c.status.in_(RESUMABLE), free)
        .order_by(tasks.c.id)
        .limit(limit)
    )
    ids = [int(r.id) for r in rows]
    next_expiry = (
        await conn.execute(
            select(func.min(tasks.c.lease_expires_at)).where(
                tasks.c.status.in_(RESUMABLE), tasks.c.lease_expires_at > now
            )
        )
    ).scalar_one_or_none()
    return ids, next_expiry


async def task_event_insert(
    db: Database, conn: AsyncConnection, task_id: int, type_: str, data: Any, now: datetime
) -> None:
    """Append one execution event to a task; wakes `WAKE_TASKS` at commit."""
    await conn.execute(
        insert(task_events).values(task_id=task_id, type=type_, data=data, created_at=now)
    )
    db.notify(conn, WAKE_TASKS)


async def task_events_of(conn: AsyncConnection, task_id: int) -> list[dict[str, Any]]:
    """A task's execution events, oldest first."""
    rows = await conn.execute(
        select(task_events).where(task_events.c.task_id == task_id).order_by(task_events.c.id)
    )
    return [dict(r._mapping) for r in rows]


async def tasks_stale(
    conn: AsyncConnection, thresholds: dict[str, float], now: datetime, limit: int
) -> Sequence[int]:
    """Ids of resumable tasks whose newest activity is older than their status's threshold.

    Activity is a task's newest execution event (or, with none, its creation), never
    `updated_at`: a stage that waits on long jobs does not touch the task row. A status without
    a threshold is never stale.
    """
    newest = (
        select(task_events.c.task_id, func.max(task_events.c.created_at).label("last"))
        .group_by(task_events.c.task_id)
        .subquery()
    )
    activity = func.coalesce(newest.c.last, tasks.c.created_at)
    per_status = [
        and_(tasks.c.status == status, activity < now - timedelta(seconds=seconds))
        for status, seconds in thresholds.items()
        if status in RESUMABLE
    ]
    if not per_status:
        return []
    stmt = (
        select(tasks.c.id)
        .select_from(tasks.outerjoin(newest, newest.c.task_id == tasks.c.id))
        .where(tasks.c.status.in_(RESUMABLE), or_(*per_status))
        .order_by(tasks.c.id)
        .limit(limit)
    )
    return [int(r.id) for r in await conn.execute(stmt)]


# --- retention --------------------------------------------------------------------------------


async def tasks_prunable(conn: AsyncConnection, cutoff: datetime, limit: int) -> list[int]:
    """Up to `limit` finished tasks that finished before `cutoff` (a read)."""
    rows = await conn.execute(
        select(tasks.c.id)
        .where(tasks.c.finished_at < cutoff, tasks.c.status.not_in(RESUMABLE))
        .order_by(tasks.c.finished_at, tasks.c.id)
        .limit(limit)
    )
    return [int(r.id) for r in rows]


async def tasks_prune(conn: AsyncConnection, ids: Sequence[int]) -> int:
    """Delete the finished tasks `ids` with their events; how many tasks."""
    ids = list(ids)
    finished = select(tasks.c.id).where(tasks.c.id.in_(ids), tasks.c.status.not_in(RESUMABLE))
    await conn.execute(delete(task_events).where(task_events.c.task_id.in_(finished)))
    result = await conn.execute(
        delete(tasks).where(tasks.c.id.in_(ids), tasks.c.status.not_in(RESUMABLE))
    )
    return int(result.rowcount)


async def task_counts(conn: AsyncConnection) -> dict[str, int]:
    """Row counts of `tasks` and `task_events`."""
    out = {}
    for table in (tasks, task_events):
        out[table.name] = int(
            (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        )
    return out
