"""Storage operations that guard and change a deck's set of pages (noun-first names).

Optimistic concurrency rests on two row locks: `page_lock` before a page gets a new version and
`deck_lock` before the deck's page set changes. On PostgreSQL the `UPDATE` takes the row lock,
so a concurrent writer waits and then reads the committed head; on SQLite the write transaction
already holds the database's one writer lock. Either way the caller compares the head it reads
after locking with the version the client based its edit on.
"""

from __future__ import annotations

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.decks.schema import decks, page_versions, pages


async def page_lock(conn: AsyncConnection, page_id: int) -> int | None:
    """Lock a page row for this transaction; its current version number, None when it is gone."""
    locked = await conn.execute(
        update(pages).where(pages.c.id == page_id).values(position=pages.c.position)
    )
    if locked.rowcount != 1:
        return None
    return await page_head_number(conn, page_id)


async def page_head_number(conn: AsyncConnection, page_id: int) -> int:
    """The number of a page's current version (0 before its first)."""
    value = (
        await conn.execute(
            select(page_versions.c.number)
            .select_from(
                pages.join(page_versions, page_versions.c.id == pages.c.current_version_id)
            )
            .where(pages.c.id == page_id)
        )
    ).scalar()
    return int(value) if value is not None else 0


async def deck_lock(conn: AsyncConnection, deck_id: int) -> int | None:
    """Lock a deck row for this transaction; its version, None when it is gone."""
    locked = await conn.execute(
        update(decks).where(decks.c.id == deck_id).values(version=decks.c.version)
    )
    if locked.rowcount != 1:
        return None
    value = (await conn.execute(select(decks.c.version).where(decks.c.id == deck_id))).scalar()
    return int(value) if value is not None else None


async def page_delete(conn: AsyncConnection, page_id: int) -> bool:
    """Delete a page and all its versions; True when it existed."""
    await conn.execute(delete(page_versions).where(page_versions.c.page_id == page_id))
    return (await conn.execute(delete(pages).where(pages.c.id == page_id))).rowcount == 1


async def page_rename(conn: AsyncConnection, page_id: int, name: str) -> bool:
    """Give a page a new name; True when it existed."""
    result = await conn.execute(update(pages).where(pages.c.id == page_id).values(name=name))
    return result.rowcount == 1


async def page_names(conn: AsyncConnection, deck_id: int) -> list[str]:
    """A deck's page names in showing order."""
    rows = await conn.execute(
        select(pages.c.name).where(pages.c.deck_id == deck_id).order_by(pages.c.position)
    )
    return [str(r.name) for r in rows]


async def page_reorder(conn: AsyncConnection, deck_id: int, names: list[str]) -> None:
    """Show a deck's pages in the order of `names` (every page of the deck, each once)."""
    for position, name in enumerate(names):
        await conn.execute(
            update(pages)
            .where(pages.c.deck_id == deck_id, pages.c.name == name)
            .values(position=position)
        )
