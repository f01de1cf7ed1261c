"""Statements on the pages of render requests (`page_*`, `pages_*`): one row per page.

Every render request is a request of N pages: a deck's request renders every page of a deck
version, any other request one page, under one admission and one lease at a time. Each page's
result is committed on its own row by `page_commit`, a compare-and-set that
applies only while the committing attempt still holds its slots under a live lease, the request
is running, not cancelled and within its deadline, and the page is still pending: a late or
duplicate result is refused, so a page is committed exactly once. The commit of the last
pending page also ends the attempt and the request (`_request_end`). This is the only commit
of a render's result: there is no second path for a single picture.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.render.control.models import (
    ACTIVE_ATTEMPT,
    DECK_KIND,
    PAGE_COMMITTED,
    PAGE_PENDING,
    AttemptState,
    RenderAttempt,
    RenderPage,
    RequestStatus,
)
from deckyard.render.control.schema import render_attempts, render_pages, render_requests
from deckyard.render.control.store import ResultRefused, wake_on_commit

A = render_attempts
P = render_pages
R = render_requests


async def pages_of_request(conn: AsyncConnection, request_id: int) -> list[RenderPage]:
    """Every page of a deck request, in page order."""
    rows = await conn.execute(
        select(*P.c).where(P.c.request_id == request_id).order_by(P.c.page_index)
    )
    return [RenderPage.from_row(r) for r in rows]


async def pages_pending(conn: AsyncConnection, request_id: int) -> list[int]:
    """The indices of the pages of a deck request that have no committed result yet."""
    rows = await conn.execute(
        select(P.c.page_index)
        .where(P.c.request_id == request_id, P.c.status == PAGE_PENDING)
        .order_by(P.c.page_index)
    )
    return [int(r.page_index) for r in rows]


async def page_commit(
    db: Database,
    conn: AsyncConnection,
    attempt: RenderAttempt,
    index: int,
    *,
    result: dict[str, Any] | None,
    artifact_key: str | None,
    error_code: str | None,
    error_message: str | None,
    now: datetime,
) -> bool:
    """Commit one page's result with a compare-and-set, or raise `ResultRefused`.

    The attempt row is touched first under the same guards as `result_commit` (slot held,
    active, lease not expired): on PostgreSQL that row lock orders this commit against a
    concurrent release or recovery of the attempt; on SQLite the writer lock does. Returns True
    when this was the request's last pending page (the attempt and the request then ended in
    this transaction, as `_request_end` says). Raising rolls back the caller's transaction.

    The request is read, not locked, before the page is written: on PostgreSQL a cancel can
    commit after that read, so the statement that ends the request carries the same guards.
    When they refuse, the last page is refused too, and the attempt, still holding its slots,
    is ended with the request as the cancel demands (the receipt pass stops it, or its end
    finds the cancel: `request_requeue_or_fail`).
    """
    held = await conn.execute(
        update(A)
        .where(
            A.c.id == attempt.id,
            A.c.active_occupancy == 1,
            A.c.status.in_(ACTIVE_ATTEMPT),
            A.c.lease_expires_at > now,
        )
        .values(updated_at=now)
    )
    if held.rowcount != 1:
        raise ResultRefused(f"attempt {attempt.attempt_key}: its slots or lease are gone")
    live = (
        await conn.execute(
            select(R.c.kind).where(
                R.c.id == attempt.request_id,
                R.c.status == RequestStatus.RUNNING.value,
                R.c.cancel_requested_at.is_(None),
                R.c.deadline_at > now,
            )
        )
    ).first()
    if live is None:
        raise ResultRefused(
            f"request {attempt.request_id} was cancelled, passed its deadline or ended"
        )
    done = await conn.execute(
        update(P)
        .where(
            P.c.request_id == attempt.request_id,
            P.c.page_index == index,
            P.c.status == PAGE_PENDING,
        )
        .values(
            status=PAGE_COMMITTED,
            attempt_id=attempt.id,
            result=result,
            artifact_key=artifact_key,
            error_code=error_code,
            error_message=(error_message or "")[:2000] or None,
            committed_at=now,
        )
    )
    if done.rowcount != 1:
        raise ResultRefused(f"request {attempt.request_id} page {index}: already committed")
    left = (
        await conn.execute(
            select(func.count()).where(
                P.c.request_id == attempt.request_id, P.c.status == PAGE_PENDING
            )
        )
    ).scalar_one()
    if left:
        return False
    failed = live.kind != DECK_KIND and error_code is not None
    await conn.execute(
        update(A)
        .where(A.c.id == attempt.id, A.c.active_occupancy == 1)
        .values(
            active_occupancy=0,
            status=(AttemptState.FAILED if failed else AttemptState.SUCCEEDED).value,
            last_receipt_status=AttemptState.SUCCEEDED.value,
            error_code=error_code if failed else None,
            error_message=(error_message or "")[:2000] or None if failed else None,
            finished_at=now,
            updated_at=now,
        )
    )
    ended = await conn.execute(
        update(R)
        .where(
            R.c.id == attempt.request_id,
            R.c.status == RequestStatus.RUNNING.value,
            R.c.cancel_requested_at.is_(None),
            R.c.deadline_at > now,
        )
        .values(
            **await _request_end(conn, attempt, live.kind, result, artifact_key, failed),
            error_code=error_code if failed else None,
            error_message=(error_message or "")[:2000] or None if failed else None,
            finished_at=now,
            updated_at=now,
        )
    )
    if ended.rowcount != 1:
        raise ResultRefused(
            f"request {attempt.request_id} was cancelled, passed its deadline or ended"
        )
    wake_on_commit(db, conn)
    return True


async def _request_end(
    conn: AsyncConnection,
    attempt: RenderAttempt,
    kind: str,
    result: dict[str, Any] | None,
    artifact_key: str | None,
    failed: bool,
) -> dict[str, Any]:
    """What a request's row says once its last page is committed.

    A deck's result is its page count (each page's result is on its row). A request of one
    page for anything else ends as that page did: succeeded with the page's result and
    artefact, or failed with the code its content failed with (not retried: it would fail
    the same way again).
    """
    if kind == DECK_KIND:
        pages = (
            await conn.execute(select(func.count()).where(P.c.request_id == attempt.request_id))
        ).scalar_one()
        return {"status": RequestStatus.SUCCEEDED.value, "result": {"pages": int(pages)}}
    if failed:
        return {"status": RequestStatus.FAILED.value, "result": None, "artifact_key": None}
    return {
        "status": RequestStatus.SUCCEEDED.value,
        "result": None if result is None else {"request_id": attempt.request_id, **result},
        "artifact_key": artifact_key,
    }
