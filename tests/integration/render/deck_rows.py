"""A pending deck request on one renderer, and its pages committed as rendered, written
straight through the store: the rows the deck tests of this package start from."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.render.control.models import DECK_KIND, RenderAttempt, RendererState
from deckyard.render.control.store import (
    NewRequest,
    RendererSeen,
    page_commit,
    renderer_upsert_if_changed,
    request_insert,
)


async def pending_deck(
    db: Database,
    pages: int,
    at: datetime,
    *,
    slots: int = 4,
    max_attempts: int = 3,
    deadline: timedelta = timedelta(minutes=5),
    job: int = 7,
) -> int:
    """Renderer `r1` (epoch `e1`) up with `slots` slots and a pending deck request of `pages`
    pages of job `job`, opened at `at`; returns the request's id."""
    async with db.write_transaction() as conn:
        seen = RendererSeen("r1", "http://r1", RendererState.UP, "r1", "e1", slots)
        await renderer_upsert_if_changed(conn, None, seen, at)
        new = NewRequest(
            kind=DECK_KIND,
            workspace_id="ws",
            input={"pages": [{"document": f"<p>{i}</p>"} for i in range(pages)]},
            input_hash="h",
            max_attempts=max_attempts,
            deadline_at=at + deadline,
            parent_job_id=job,
        )
        request, _ = await request_insert(db, conn, new, at)
    return request.id


async def commit_rendered(
    db: Database, conn: AsyncConnection, attempt: RenderAttempt, index: int, at: datetime
) -> bool:
    """Commit page `index` of `attempt` as rendered (artefact `k<index>`); True when it was the
    deck's last pending page."""
    return await page_commit(
        db,
        conn,
        attempt,
        index,
        result={"artifact_key": f"k{index}"},
        artifact_key=f"k{index}",
        error_code=None,
        error_message=None,
        now=at,
    )
