"""Statements on render attempts after admission (noun-first: `attempt_*`, `lease_*`, `result_*`).

An attempt holds its renderer slot while `active_occupancy = 1`; the partial unique index on
`(worker_id, worker_epoch, slot) WHERE active_occupancy = 1` makes a second holder impossible.
Every function that ends an attempt clears `active_occupancy` in the same guarded UPDATE. Admission
(`request_admit`) and the shared helpers are in `store`; see there for the column names.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.render.control.models import RenderAttempt
from deckyard.render.control.schema import render_attempts, render_requests
from deckyard.render.control.status import ACTIVE_ATTEMPT, AttemptState, RequestStatus
from deckyard.render.control.store import (
    ATTEMPT_COLUMNS,
    request_requeue_or_fail,
    wake_on_commit,
)
from deckyard.render.protocol import RenderErrorCode

A = render_attempts
R = render_requests


class ResultRefused(Exception):
    """The result CAS lost: the slot, the lease, the request or its deadline no longer allow it.

    Raised inside the commit transaction so that everything it wrote is rolled back.
    """


async def attempts_active(conn: AsyncConnection) -> list[RenderAttempt]:
    """Attempts that hold a slot."""
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(A.c.active_occupancy == 1).order_by(A.c.id)
    )
    return [RenderAttempt.from_row(r) for r in rows]


async def attempts_of_request(conn: AsyncConnection, request_id: int) -> list[RenderAttempt]:
    """Every attempt of one request, oldest first."""
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(A.c.request_id == request_id).order_by(A.c.id)
    )
    return [RenderAttempt.from_row(r) for r in rows]


async def lease_next_expiry(conn: AsyncConnection) -> datetime | None:
    """The nearest lease expiry among slot holders, or None when no slot is held."""
    nearest: datetime | None = (
        await conn.execute(select(func.min(A.c.lease_expires_at)).where(A.c.active_occupancy == 1))
    ).scalar_one_or_none()
    return nearest


async def lease_renew(
    conn: AsyncConnection,
    attempt_ids: Sequence[int],
    receipt_status: str,
    now: datetime,
    lease_seconds: float,
) -> set[int]:
    """Extend the leases of attempts a real live receipt just vouched for: one UPDATE.

    A lease that already expired is not revived, even before recovery has run: the attempt is
    lost and its result will be refused.
    """
    if not attempt_ids:
        return set()
    rows = await conn.execute(
        update(A)
        .where(
            A.c.id.in_(list(attempt_ids)),
            A.c.active_occupancy == 1,
            A.c.status.in_(ACTIVE_ATTEMPT),
            A.c.lease_expires_at > now,
        )
        .values(
            status=AttemptState.RUNNING.value,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            last_receipt_at=now,
            last_receipt_status=receipt_status,
            updated_at=now,
        )
        .returning(A.c.id)
    )
    return {r.id for r in rows}


async def attempt_release(
    db: Database,
    conn: AsyncConnection,
    attempt_id: int,
    state: AttemptState,
    now: datetime,
    *,
    code: str | None = None,
    message: str | None = None,
) -> bool:
    """End an attempt that still holds its slot, freeing the slot."""
    result = await conn.execute(
        update(A)
        .where(A.c.id == attempt_id, A.c.active_occupancy == 1)
        .values(
            active_occupancy=0,
            status=state.value,
            error_code=code,
            error_message=(message or "")[:2000] or None,
            finished_at=now,
            updated_at=now,
        )
    )
    if result.rowcount == 1:
        wake_on_commit(db, conn)
        return True
    return False


async def attempt_end(
    db: Database,
    conn: AsyncConnection,
    attempt: RenderAttempt,
    state: AttemptState,
    *,
    code: str,
    message: str,
    retryable: bool,
    retry_after_seconds: float,
    now: datetime,
    refund: bool = False,
) -> RequestStatus | None:
    """Release an attempt that produced no result and requeue or fail its request.

    Returns the request's new status, or None when the attempt had already been released.
    """
    if not await attempt_release(db, conn, attempt.id, state, now, code=code, message=message):
        return None
    return await request_requeue_or_fail(
        db,
        conn,
        attempt.request_id,
        code=code,
        message=message,
        retryable=retryable,
        retry_at=now + timedelta(seconds=retry_after_seconds),
        now=now,
        refund=refund,
    )


async def result_commit(
    db: Database,
    conn: AsyncConnection,
    attempt: RenderAttempt,
    result: dict[str, Any],
    artifact_key: str,
    now: datetime,
) -> None:
    """Commit a succeeded attempt's result with one compare-and-set, or raise `ResultRefused`.

    It applies only while the attempt still holds its slot under a lease that has not expired
    (an expired lease that recovery has not reached yet counts as expired), and the request is
    running, not cancelled and within its deadline. Raising rolls back the caller's transaction.
    """
    held = await conn.execute(
        update(A)
        .where(
            A.c.id == attempt.id,
            A.c.active_occupancy == 1,
            A.c.status.in_(ACTIVE_ATTEMPT),
            A.c.lease_expires_at > now,
        )
        .values(
            active_occupancy=0,
            status=AttemptState.SUCCEEDED.value,
            last_receipt_status=AttemptState.SUCCEEDED.value,
            finished_at=now,
            updated_at=now,
        )
    )
    if held.rowcount != 1:
        current = (
            await conn.execute(
                select(A.c.status, A.c.active_occupancy, A.c.lease_expires_at).where(
                    A.c.id == attempt.id
                )
            )
        ).one()
        if current.status == AttemptState.SUCCEEDED.value:
            why = "its result was already committed"
        elif not current.active_occupancy:
            why = f"its slot was released ({current.status})"
        else:
            why = f"its lease expired at {current.lease_expires_at.isoformat()}"
        raise ResultRefused(f"attempt {attempt.attempt_key}: {why}")
    done = await conn.execute(
        update(R)
        .where(
            R.c.id == attempt.request_id,
            R.c.status == RequestStatus.RUNNING.value,
            R.c.cancel_requested_at.is_(None),
            R.c.deadline_at > now,
        )
        .values(
            status=RequestStatus.SUCCEEDED.value,
            result=result,
            artifact_key=artifact_key,
            error_code=None,
            error_message=None,
            finished_at=now,
            updated_at=now,
        )
    )
    if done.rowcount != 1:
        raise ResultRefused(
            f"request {attempt.request_id} was cancelled, passed its deadline or ended"
        )
    wake_on_commit(db, conn)


async def attempts_recover_expired(
    db: Database, conn: AsyncConnection, now: datetime, retry_after_seconds: float
) -> list[int]:
    """Release every slot whose lease expired, mark those attempts lost, requeue their requests."""
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(A.c.active_occupancy == 1, A.c.lease_expires_at <= now)
    )
    lost: list[int] = []
    for attempt in [RenderAttempt.from_row(r) for r in rows]:
        status = await attempt_end(
            db,
            conn,
            attempt,
            AttemptState.LOST,
            code=RenderErrorCode.RESULT_LOST.value,
            message="no live receipt before the lease expired",
            retryable=True,
            retry_after_seconds=retry_after_seconds,
            now=now,
        )
        if status is not None:
            lost.append(attempt.id)
    return lost


async def attempts_reconcile_epoch(
    db: Database,
    conn: AsyncConnection,
    renderer_row_id: int,
    epoch: str,
    now: datetime,
    retry_after_seconds: float,
) -> list[int]:
    """A renderer restarted with `epoch`: every attempt it held under another epoch is lost now."""
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(
            A.c.active_occupancy == 1, A.c.worker_id == renderer_row_id, A.c.worker_epoch != epoch
        )
    )
    lost: list[int] = []
    for attempt in [RenderAttempt.from_row(r) for r in rows]:
        status = await attempt_end(
            db,
            conn,
            attempt,
            AttemptState.LOST,
            code=RenderErrorCode.RESULT_LOST.value,
            message=f"the renderer restarted (epoch {attempt.renderer_epoch} -> {epoch})",
            retryable=True,
            retry_after_seconds=retry_after_seconds,
            now=now,
        )
        if status is not None:
            lost.append(attempt.id)
    return lost
