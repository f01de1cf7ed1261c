"""Deck requests in storage, on SQLite and PostgreSQL: multi-slot admission and page CAS commits.

One deck request's attempt takes as many slots of one renderer as the caps allow; each page's
result is committed once, by an attempt that still holds its slots under a live lease, while the
request runs; the last page ends the attempt and the request; a lost attempt's successor gets
only the pending pages.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.coordinator import admit_due
from deckyard.render.control.models import (
    AttemptState,
    RenderAttempt,
    RequestStatus,
)
from deckyard.render.control.store import (
    ResultRefused,
    attempts_of_request,
    attempts_recover_expired,
    occupancy_snapshot,
    pages_pending,
    request_cancel_for_jobs,
    request_get,
)
from tests.integration.render.deck_rows import commit_rendered, pending_deck

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SETTINGS = Settings.load(
    render_global_cap=4,
    render_workspace_cap=3,
    render_lease_seconds=10,
    render_workspace_slot_share=1.0,
)


async def deck(db: Database, pages: int, slots: int = 4) -> int:
    """A renderer with `slots` slots and a pending deck request of `pages` pages."""
    return await pending_deck(db, pages, NOW, slots=slots)


async def admit(db: Database, at: datetime = NOW) -> tuple[RenderAttempt, list[int] | None]:
    async with db.write_transaction() as conn:
        [item] = await admit_due(db, conn, SETTINGS, at, {"r1"})
    return item.attempt, item.pages


async def commit(db: Database, attempt: RenderAttempt, index: int, at: datetime = NOW) -> bool:
    async with db.write_transaction() as conn:
        return await commit_rendered(db, conn, attempt, index, at)


async def test_a_deck_attempt_holds_slots_up_to_the_workspace_cap(db: Database) -> None:
    await deck(db, pages=5)
    attempt, pages = await admit(db)
    assert pages == [0, 1, 2, 3, 4]
    assert len(attempt.slots) == SETTINGS.render_workspace_cap == 3
    async with db.read_connection() as conn:
        occ = await occupancy_snapshot(conn)
    assert occ.total == 3 and occ.by_workspace["ws"] == 3
    assert occ.taken[(attempt.renderer_row_id, "e1")] == {0, 1, 2}


async def test_a_small_deck_takes_no_more_slots_than_pages(db: Database) -> None:
    await deck(db, pages=2)
    attempt, _pages = await admit(db)
    assert attempt.slots == [0, 1]


async def test_each_page_is_committed_once_and_the_last_ends_the_request(db: Database) -> None:
    req_id = await deck(db, pages=2)
    attempt, _ = await admit(db)
    assert await commit(db, attempt, 0) is False
    with pytest.raises(ResultRefused, match="already committed"):
        await commit(db, attempt, 0)
    assert await commit(db, attempt, 1) is True
    async with db.read_connection() as conn:
        request = await request_get(conn, req_id)
        [done] = await attempts_of_request(conn, req_id)
        occ = await occupancy_snapshot(conn)
    assert request is not None and request.status is RequestStatus.SUCCEEDED
    assert request.result == {"pages": 2}
    assert done.status is AttemptState.SUCCEEDED and done.active_occupancy == 0
    assert occ.total == 0


async def test_a_lost_attempt_is_refused_and_its_successor_gets_only_pending_pages(
    db: Database,
) -> None:
    req_id = await deck(db, pages=3)
    first, _ = await admit(db)
    await commit(db, first, 1)
    late = NOW + timedelta(seconds=SETTINGS.render_lease_seconds + 1)
    with pytest.raises(ResultRefused, match="lease"):
        await commit(db, first, 0, at=late)
    async with db.write_transaction() as conn:
        assert await attempts_recover_expired(db, conn, late, 0.0) == [first.id]
        assert await pages_pending(conn, req_id) == [0, 2]
    second, pages = await admit(db, late)
    assert pages == [0, 2] and len(second.slots) == 2
    with pytest.raises(ResultRefused):
        await commit(db, first, 2, at=late)
    assert await commit(db, second, 0, at=late) is False
    assert await commit(db, second, 2, at=late) is True


async def test_a_cancelled_deck_refuses_every_page(db: Database) -> None:
    req_id = await deck(db, pages=2)
    attempt, _ = await admit(db)
    async with db.write_transaction() as conn:
        await request_cancel_for_jobs(db, conn, [7], NOW)
    with pytest.raises(ResultRefused, match="cancelled"):
        await commit(db, attempt, 0)
    async with db.read_connection() as conn:
        assert await pages_pending(conn, req_id) == [0, 1]
