"""Storage operations on a deck's assets (noun-first names)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.decks.schema import deck_assets


@dataclass(frozen=True)
class AssetWrite:
    """What an upsert did: the content hash, and whether the path was new."""

    sha256: str
    created: bool


async def deck_asset_upsert(
    conn: AsyncConnection, deck_id: int, path: str, media_type: str, data: bytes
) -> AssetWrite:
    """Store `data` at `path`, adding the asset or replacing its content.

    The caller's write transaction serialises writers of one deck (the deck row is touched in
    the same transaction), so the read-then-write here does not race.
    """
    digest = hashlib.sha256(data).hexdigest()
    values = {"media_type": media_type, "size": len(data), "sha256": digest, "data": data}
    exists = (
        await conn.execute(
            select(deck_assets.c.sha256).where(
                deck_assets.c.deck_id == deck_id, deck_assets.c.path == path
            )
        )
    ).first()
    if exists is None:
        await conn.execute(insert(deck_assets).values(deck_id=deck_id, path=path, **values))
        return AssetWrite(digest, True)
    if exists.sha256 != digest:
        await conn.execute(
            update(deck_assets)
            .where(deck_assets.c.deck_id == deck_id, deck_assets.c.path == path)
            .values(**values)
        )
    return AssetWrite(digest, False)


async def deck_asset_delete(conn: AsyncConnection, deck_id: int, path: str) -> bool:
    """Delete one asset; True when it existed."""
    result = await conn.execute(
        delete(deck_assets).where(deck_assets.c.deck_id == deck_id, deck_assets.c.path == path)
    )
    return result.rowcount == 1


async def deck_asset_list(conn: AsyncConnection, deck_id: int) -> list[tuple[str, str, int, str]]:
    """A deck's assets as (path, media type, size, sha256), by path."""
    rows = await conn.execute(
        select(
            deck_assets.c.path, deck_assets.c.media_type, deck_assets.c.size, deck_assets.c.sha256
        )
        .where(deck_assets.c.deck_id == deck_id)
        .order_by(deck_assets.c.path)
    )
    return [(r.path, r.media_type, int(r.size), r.sha256) for r in rows]
