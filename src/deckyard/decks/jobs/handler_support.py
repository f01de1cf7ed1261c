"""What every deck job handler starts with: the job's workspace, its deck, and how it refuses."""

from __future__ import annotations

from deckyard.db import Database
from deckyard.decks.jobs.names import DeckJobErrorCode
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.store import DeckRow, deck_get, deck_source
from deckyard.jobs import JobContext, JobError


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


def workspace_of(ctx: JobContext) -> str:
    """The job's workspace; deck jobs are always enqueued with one."""
    if ctx.job.workspace_id is None:
        raise refused(DeckJobErrorCode.DECK_NOT_FOUND, "the job has no workspace")
    return ctx.job.workspace_id
