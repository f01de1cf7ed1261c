"""Deck delete (with the screenshot artefacts its versions point at) and deck copy."""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.db import Database
from deckyard.decks.errors import DeckEditError, DeckEditErrorCode
from deckyard.decks.page_edits import conflict
from deckyard.decks.store_pages import deck_copy, deck_delete, deck_lock, deck_screenshot_keys

log = logging.getLogger(__name__)


class DeckEdits:
    """Delete or copy a deck the caller owns (checked before)."""

    def __init__(self, db: Database, store: ArtifactStore, clock: Clock) -> None:
        self.db = db
        self.store = store
        self.clock = clock

    async def delete(self, deck_id: int, base: int | None) -> int:
        """Delete the deck, then its screenshot artefacts; returns how many were deleted.

        The rows go first, in one transaction: a crash before the artefacts are gone leaves
        objects no row refers to, which is what a store sweep removes, never a row pointing
        at a missing object.
        """

        async def delete_rows(conn: AsyncConnection) -> list[str]:
            head = await deck_lock(conn, deck_id)
            if head is None:
                raise DeckEditError(DeckEditErrorCode.DECK_NOT_FOUND, f"no deck {deck_id}")
            if base is not None and head != base:
                raise conflict(f"deck {deck_id}", head, base)
            keys = await deck_screenshot_keys(conn, deck_id)
            await deck_delete(conn, deck_id)
            return keys

        keys = await self.db.write(delete_rows)
        deleted = 0
        for key in keys:
            if await self.store.delete(key):
                deleted += 1
        log.info("deck %d deleted with %d screenshot artefact(s)", deck_id, deleted)
        return deleted

    async def copy(self, deck_id: int, title: str) -> int:
        """A copy of the deck (current pages as version 1, assets, validation); its id."""
        now = self.clock.now()
        new_id = await self.db.write(lambda conn: deck_copy(conn, deck_id, title, now))
        if new_id is None:
            raise DeckEditError(DeckEditErrorCode.DECK_NOT_FOUND, f"no deck {deck_id}")
        return new_id
