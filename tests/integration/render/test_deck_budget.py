"""A deck's attempt budget counts only attempts that made no progress, SQLite and PostgreSQL.

A deck attempt lost after committing a page is refunded, so a deck killed at page 7 and again
at page 20 goes on while it advances; attempts that commit nothing still use the budget up, and
a request out of budget fails.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.coordinator import admit_due
from deckyard.render.control.models import RenderAttempt, RequestStatus
from deckyard.render.control.store import (
    attempts_recover_expired,
    request_get,
)
from tests.integration.render.deck_rows import commit_rendered, pending_deck

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SETTINGS = Settings.load(
    render_global_cap=2,
    render_workspace_cap=2,
    render_lease_seconds=10,
    render_workspace_slot_share=1.0,
)
BUDGET = 2


async def deck(db: Database, pages: int) -> int:
    """A renderer with two slots and a pending deck request of `pages` pages, budget 2."""
    return await pending_deck(
        db, pages, START, slots=2, max_attempts=BUDGET, deadline=timedelta(hours=1)
    )


class Clock:
    now = START

    def later(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


async def attempt_lost(db: Database, clock: Clock, req_id: int, commits: list[int]) -> str:
    """Admit the next attempt, commit `commits`, let its lease expire; the request's status."""
    async with db.write_transaction() as conn:
        [item] = await admit_due(db, conn, SETTINGS, clock.later(1), {"r1"})
    attempt: RenderAttempt = item.attempt
    for index in commits:
        async with db.write_transaction() as conn:
            await commit_rendered(db, conn, attempt, index, clock.now)
    async with db.write_transaction() as conn:
        lost = await attempts_recover_expired(db, conn, clock.later(11), 0.0)
        assert lost == [attempt.id]
        request = await request_get(conn, req_id)
    assert request is not None
    return request.status.value


async def test_attempts_that_commit_pages_do_not_spend_the_budget(db: Database) -> None:
    req_id = await deck(db, pages=30)
    clock = Clock()
    # lost at page 7, then at page 20: more attempts than the budget, still going
    assert await attempt_lost(db, clock, req_id, list(range(7))) == RequestStatus.PENDING
    assert await attempt_lost(db, clock, req_id, list(range(7, 20))) == RequestStatus.PENDING
    # attempts that commit nothing spend it: the second of them ends the request
    assert await attempt_lost(db, clock, req_id, []) == RequestStatus.PENDING
    assert await attempt_lost(db, clock, req_id, []) == RequestStatus.FAILED
