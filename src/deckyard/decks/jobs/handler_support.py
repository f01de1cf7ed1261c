"""What every deck job handler starts with: the job's workspace, its deck, and how it refuses."""

from __future__ import annotations

from typing import Any

from deckyard.db import Database
from deckyard.decks.jobs.names import DeckJobErrorCode
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.store import DeckRow, deck_get, deck_source
from deckyard.jobs import JobContext, JobError
from deckyard.render.control.deck_requests import PageRender


async def load_deck(db: Database, deck_id: int, workspace_id: str) -> tuple[DeckRow, DeckSource]:
    """A stored deck and its rebuilt source; raises `JobError` when it is not there."""
    async with db.read_connection() as conn:
        row = await deck_get(conn, deck_id, workspace_id)
        if row is None:
            raise refused(DeckJobErrorCode.DECK_NOT_FOUND, f"no deck {deck_id}")
        return row, await deck_source(conn, row)


def refused(code: str, message: str) -> JobError:
    """A failure that another attempt would not fix: the job fails at once with `code`."""
    return JobError(code, message, retryable=False)


def rendered(name: str, outcome: PageRender) -> dict[str, Any]:
    """The committed result of page `name`'s render; refuses the job with the page's code
    when it did not render (`RENDER_RESULT_LOST` when it has none)."""
    if outcome.error_code is not None or not outcome.result:
        code = outcome.error_code or "RENDER_RESULT_LOST"
        raise refused(code, f"{name}: {outcome.message or code}")
    return outcome.result


def workspace_of(ctx: JobContext) -> str:
    """The job's workspace; deck jobs are always enqueued with one."""
    if ctx.job.workspace_id is None:
        raise refused(DeckJobErrorCode.DECK_NOT_FOUND, "the job has no workspace")
    return ctx.job.workspace_id
