"""Direct edits of a deck's page set: delete, rename and reorder pages, and version diffs.

None of these changes a page's content, so none needs the write gate: every page keeps the
version that passed validation. Each runs in one write transaction under the row lock of the
page or deck it changes (`page_lock`, `deck_lock`) and compares the client's `If-Match` with
the version it finds there; a mismatch is `EDIT_CONFLICT` naming the current version.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.db import Database
from deckyard.decks.errors import DeckEditError, DeckEditErrorCode
from deckyard.decks.store import deck_touch, page_find, page_version_by_number
from deckyard.decks.store_pages import (
    deck_lock,
    page_delete,
    page_lock,
    page_names,
    page_rename,
    page_reorder,
)


@dataclass(frozen=True)
class PageDiff:
    """A unified diff of a page's source between two of its versions."""

    page: str
    from_number: int
    to_number: int
    diff: str


def conflict(what: str, current: int, base: int) -> DeckEditError:
    """`EDIT_CONFLICT`: `what` is at version `current`, not at the client's `base`."""
    return DeckEditError(
        DeckEditErrorCode.EDIT_CONFLICT,
        f"{what} is at version {current}, not {base}; reload and edit again",
        current=current,
    )


async def _locked_page(conn: AsyncConnection, deck_id: int, name: str, base: int | None) -> int:
    page_id = await page_find(conn, deck_id, name)
    head = None if page_id is None else await page_lock(conn, page_id)
    if page_id is None or head is None:
        raise DeckEditError(DeckEditErrorCode.PAGE_NOT_FOUND, f"no page {name!r}", field="page")
    if base is not None and head != base:
        raise conflict(f"page {name!r}", head, base)
    return page_id


class PageEdits:
    """Delete, rename and reorder the pages of a deck the caller owns (checked before)."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    async def delete(self, deck_id: int, name: str, base: int | None) -> None:
        """Delete a page and its versions; a deck keeps at least one page."""

        async def delete(conn: AsyncConnection) -> None:
            page_id = await _locked_page(conn, deck_id, name, base)
            await deck_lock(conn, deck_id)
            if len(await page_names(conn, deck_id)) <= 1:
                raise DeckEditError(
                    DeckEditErrorCode.LAST_PAGE, "a deck keeps at least one page", field="page"
                )
            await page_delete(conn, page_id)
            await deck_touch(conn, deck_id, self.clock.now())

        await self.db.write(delete)

    async def rename(self, deck_id: int, name: str, new_name: str, base: int | None) -> None:
        """Give a page a new name (its versions go with it)."""

        async def rename(conn: AsyncConnection) -> None:
            page_id = await _locked_page(conn, deck_id, name, base)
            await deck_lock(conn, deck_id)
            if new_name != name and await page_find(conn, deck_id, new_name) is not None:
                raise DeckEditError(
                    DeckEditErrorCode.PAGE_EXISTS, f"page {new_name!r} exists", field="name"
                )
            await page_rename(conn, page_id, new_name)
            await deck_touch(conn, deck_id, self.clock.now())

        await self.db.write(rename)

    async def reorder(self, deck_id: int, order: list[str], base: int | None) -> None:
        """Show the pages in `order`, which must name every page of the deck exactly once."""

        async def reorder(conn: AsyncConnection) -> None:
            head = await deck_lock(conn, deck_id)
            if head is None:
                raise DeckEditError(DeckEditErrorCode.PAGE_NOT_FOUND, f"no deck {deck_id}")
            if base is not None and head != base:
                raise conflict(f"deck {deck_id}", head, base)
            names = await page_names(conn, deck_id)
            if sorted(names) != sorted(order) or len(set(order)) != len(order):
                missing = sorted(set(names) - set(order))
                unknown = sorted(set(order) - set(names))
                raise DeckEditError(
                    DeckEditErrorCode.ORDER_MISMATCH,
                    "`pages` must list every page of the deck once"
                    f" (missing: {missing}, unknown: {unknown})",
                    field="pages",
                )
            await page_reorder(conn, deck_id, order)
            await deck_touch(conn, deck_id, self.clock.now())

        await self.db.write(reorder)

    async def diff(self, deck_id: int, name: str, old: int, new: int) -> PageDiff | None:
        """The unified diff of a page's source from version `old` to `new`; None if missing."""
        async with self.db.read_connection() as conn:
            page_id = await page_find(conn, deck_id, name)
            if page_id is None:
                return None
            a = await page_version_by_number(conn, page_id, old)
            b = await page_version_by_number(conn, page_id, new)
        if a is None or b is None:
            return None
        lines = difflib.unified_diff(
            a.source.splitlines(keepends=True),
            b.source.splitlines(keepends=True),
            fromfile=f"{name}@{old}",
            tofile=f"{name}@{new}",
        )
        return PageDiff(name, old, new, "".join(_terminated(lines)))


def _terminated(lines: Iterable[str]) -> list[str]:
    """Diff lines, each ending in a newline (difflib leaves a last line without one as is)."""
    out: list[str] = []
    for text in lines:
        out.append(text if text.endswith("\n") else text + "\n\\ No newline at end of file\n")
    return out
