"""A cancel that commits in the middle of another state change is kept, SQLite and PostgreSQL.

Each test commits the concurrent change between two statements of a store function, at the
point where READ COMMITTED lets PostgreSQL's next statement see it: a cancel while the last
page of a deck commits, a requeue while a cancel runs, a cancel while a request out of
attempts fails. SQLite's writer lock admits no other write into an open write transaction, so
there the change commits just before that transaction instead; the outcome must be the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from sqlalchemy import Update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.coordinator import admit_due
from deckyard.render.control.models import (
    AttemptState,
    RenderAttempt,
    RenderRequest,
    RequestStatus,
)
from deckyard.render.control.schema import render_requests
from deckyard.render.control.store import (
    ResultRefused,
    attempt_end,
    pages_pending,
    request_cancel,
    request_cancel_for_jobs,
    request_get,
)
from deckyard.render.protocol import RenderErrorCode
from tests.integration.render.deck_rows import commit_rendered, pending_deck

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SETTINGS = Settings.load(
    render_global_cap=4,
    render_workspace_cap=4,
    render_lease_seconds=10,
    render_workspace_slot_share=1.0,
)
JOB = 7


async def running_deck(db: Database, pages: int, max_attempts: int = 3) -> RenderAttempt:
    """A deck request of job `JOB` with `pages` pages, admitted: its attempt."""
    await pending_deck(db, pages, NOW, max_attempts=max_attempts, job=JOB)
    async with db.write_transaction() as conn:
        [item] = await admit_due(db, conn, SETTINGS, NOW, {"r1"})
    return item.attempt


async def commit_page(
    db: Database, conn: AsyncConnection, attempt: RenderAttempt, index: int
) -> bool:
    """Commit page `index` of the deck as rendered; True when it was the last one."""
    return await commit_rendered(db, conn, attempt, index, NOW)


async def lose(db: Database, conn: AsyncConnection, attempt: RenderAttempt) -> RequestStatus | None:
    """End `attempt` without a result, as a receipt or the lease recovery does."""
    return await attempt_end(
        db,
        conn,
        attempt,
        AttemptState.LOST,
        code=RenderErrorCode.RESULT_LOST.value,
        message="the attempt ended with pages not committed",
        retryable=True,
        retry_after_seconds=0.0,
        now=NOW,
    )


async def request_now(db: Database, request_id: int) -> RenderRequest:
    async with db.read_connection() as conn:
        request = await request_get(conn, request_id)
    assert request is not None
    return request


def update_of_requests(nth: int) -> Callable[[Any], bool]:
    """Picks the `nth` UPDATE of `render_requests` a transaction executes."""
    seen = 0

    def pick(statement: Any) -> bool:
        nonlocal seen
        if isinstance(statement, Update) and statement.table is render_requests:
            seen += 1
            return seen == nth
        return False

    return pick


class _Interleaved:
    """`conn`, but `change` commits just before the statement `pick` chooses is executed."""

    def __init__(
        self,
        conn: AsyncConnection,
        pick: Callable[[Any], bool],
        change: Callable[[], Awaitable[None]],
    ) -> None:
        self.conn = conn
        self.pick = pick
        self.change = change
        self.done = False

    async def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.done and self.pick(statement):
            self.done = True
            await self.change()
        return await self.conn.execute(statement, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


@asynccontextmanager
async def interleaved(
    db: Database, pick: Callable[[Any], bool], change: Callable[[], Awaitable[None]]
) -> AsyncIterator[AsyncConnection]:
    """A write transaction into which `change`, in a transaction of its own, commits just before
    the statement `pick` chooses; after the transaction when none was chosen.

    A SQLite file (one process, one writer at a time) cannot take that commit while the
    transaction is open: there `change` commits just before the transaction begins.
    """
    if db.is_single_process:
        await change()
        async with db.write_transaction() as conn:
            yield conn
        return
    async with db.write_transaction() as conn:
        proxy = _Interleaved(conn, pick, change)
        yield cast(AsyncConnection, proxy)
    if not proxy.done:
        await change()


async def test_a_deck_cancelled_while_its_last_page_commits_ends_cancelled(db: Database) -> None:
    attempt = await running_deck(db, pages=2)
    async with db.write_transaction() as conn:
        assert await commit_page(db, conn, attempt, 0) is False
    cancelled: list[int] = []

    async def cancel() -> None:
        async with db.write_transaction() as conn:
            cancelled.append(await request_cancel_for_jobs(db, conn, [JOB], NOW))

    # The cancel commits after page_commit read the request as running, not cancelled.
    with pytest.raises(ResultRefused, match="cancelled"):
        async with interleaved(db, update_of_requests(1), cancel) as conn:
            await commit_page(db, conn, attempt, 1)
    assert cancelled == [1]
    async with db.read_connection() as conn:
        assert await pages_pending(conn, attempt.request_id) == [1]
    # The renderer reports the attempt done with a page not committed: it ends, cancelled.
    async with db.write_transaction() as conn:
        assert await lose(db, conn, attempt) is RequestStatus.CANCELLED
    request = await request_now(db, attempt.request_id)
    assert request.status is RequestStatus.CANCELLED and request.result is None


async def test_a_request_requeued_while_it_is_cancelled_ends_cancelled(db: Database) -> None:
    attempt = await running_deck(db, pages=1)
    requeued: list[RequestStatus | None] = []

    async def requeue() -> None:
        async with db.write_transaction() as conn:
            requeued.append(await lose(db, conn, attempt))

    # The attempt is lost and its request requeued (running to pending) while the cancel runs.
    async with interleaved(db, update_of_requests(2), requeue) as conn:
        touched = await request_cancel(db, conn, attempt.request_id, NOW)
    assert touched == 1
    assert len(requeued) == 1
    request = await request_now(db, attempt.request_id)
    assert request.status is RequestStatus.CANCELLED
    assert request.error_code == RenderErrorCode.CANCELLED


async def test_a_request_cancelled_while_its_last_attempt_fails_ends_cancelled(
    db: Database,
) -> None:
    attempt = await running_deck(db, pages=1, max_attempts=1)
    cancelled: list[int] = []

    async def cancel() -> None:
        async with db.write_transaction() as conn:
            cancelled.append(await request_cancel(db, conn, attempt.request_id, NOW))

    # The cancel commits after the request was read running, not cancelled, with no attempt
    # left: the failure the attempt's end had decided on must not stand.
    async with interleaved(db, update_of_requests(1), cancel) as conn:
        status = await lose(db, conn, attempt)
    assert cancelled == [1]
    assert status is RequestStatus.CANCELLED
    request = await request_now(db, attempt.request_id)
    assert request.status is RequestStatus.CANCELLED
    assert request.error_code == RenderErrorCode.CANCELLED
