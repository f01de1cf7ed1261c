"""Storage operations on a deck's assets and the content-addressed blobs they refer to.

An asset row (`deck_assets`) names a path, a media type and a SHA-256; the bytes live once per
distinct content in `asset_blobs`. Two decks (or a deck and its copy) with the same bytes share
one blob; deleting one asset leaves the other's blob in place, and `asset_blobs_sweep` removes a
blob only when no asset refers to it and no upload touched it within the grace period.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, delete, exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.decks.schema import asset_blobs, deck_assets


@dataclass(frozen=True)
class AssetWrite:
    """What an upsert did: the content hash, and whether the path was new."""

    sha256: str
    created: bool


async def asset_blob_store(db: Database, conn: AsyncConnection, data: bytes, now: datetime) -> str:
    """Store `data` once by its SHA-256 (or mark the existing blob as just used); its hash.

    Bumping `stored_at` of an existing blob is what keeps a concurrent sweep from deleting the
    blob this transaction is about to refer to: the sweep only deletes blobs older than its
    grace period, and the guarded delete re-checks the row it deletes.
    """
    digest = hashlib.sha256(data).hexdigest()
    inserted = (
        await conn.execute(
            db.insert_ignoring_conflicts(asset_blobs, index_elements=["sha256"])
            .values(sha256=digest, size=len(data), data=data, stored_at=now)
            .returning(asset_blobs.c.sha256)
        )
    ).first()
    if inserted is None:
        await conn.execute(
            update(asset_blobs).where(asset_blobs.c.sha256 == digest).values(stored_at=now)
        )
    return digest


async def deck_asset_upsert(
    db: Database,
    conn: AsyncConnection,
    deck_id: int,
    path: str,
    media_type: str,
    data: bytes,
    now: datetime,
) -> AssetWrite:
    """Store `data` at `path`, adding the asset or replacing its content.

    The caller's write transaction serialises writers of one deck (the deck row is touched in
    the same transaction), so the read-then-write here does not race.
    """
    digest = await asset_blob_store(db, conn, data, now)
    values = {"media_type": media_type, "size": len(data), "sha256": digest}
    current = await deck_asset_sha256(conn, deck_id, path)
    if current is None:
        await conn.execute(insert(deck_assets).values(deck_id=deck_id, path=path, **values))
        return AssetWrite(digest, True)
    if current != digest:
        await conn.execute(
            update(deck_assets)
            .where(deck_assets.c.deck_id == deck_id, deck_assets.c.path == path)
            .values(**values)
        )
    return AssetWrite(digest, False)


async def asset_blob_get(conn: AsyncConnection, digest: str) -> bytes | None:
    """The bytes of the blob `digest`, or None when there is none."""
    row = (
        await conn.execute(select(asset_blobs.c.data).where(asset_blobs.c.sha256 == digest))
    ).first()
    return None if row is None else bytes(row.data)


async def deck_asset_sha256(conn: AsyncConnection, deck_id: int, path: str) -> str | None:
    """The content hash of one asset, or None when the deck has no asset at `path`."""
    row = (
        await conn.execute(
            select(deck_assets.c.sha256).where(
                deck_assets.c.deck_id == deck_id, deck_assets.c.path == path
            )
        )
    ).first()
    return None if row is None else str(row.sha256)


async def deck_asset_delete(conn: AsyncConnection, deck_id: int, path: str) -> bool:
    """Delete one asset (its blob stays for the sweep); True when it existed."""
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


def _unreferenced() -> ColumnElement[bool]:
    return ~exists().where(deck_assets.c.sha256 == asset_blobs.c.sha256)


async def asset_blobs_unreferenced(
    conn: AsyncConnection, cutoff: datetime, limit: int
) -> list[str]:
    """Up to `limit` blobs no asset refers to and no upload used since `cutoff` (a read)."""
    rows = await conn.execute(
        select(asset_blobs.c.sha256)
        .where(asset_blobs.c.stored_at < cutoff, _unreferenced())
        .order_by(asset_blobs.c.sha256)
        .limit(limit)
    )
    return [str(r.sha256) for r in rows]


async def asset_blobs_delete(
    conn: AsyncConnection, digests: Sequence[str], cutoff: datetime
) -> int:
    """Delete those of `digests` still unreferenced and unused since `cutoff`; how many."""
    result = await conn.execute(
        delete(asset_blobs).where(
            asset_blobs.c.sha256.in_(list(digests)),
            asset_blobs.c.stored_at < cutoff,
            _unreferenced(),
        )
    )
    return int(result.rowcount)


async def asset_blob_stats(conn: AsyncConnection) -> tuple[int, int]:
    """How many blobs are stored, and their total size in bytes."""
    row = (
        await conn.execute(
            select(func.count(), func.coalesce(func.sum(asset_blobs.c.size), 0)).select_from(
                asset_blobs
            )
        )
    ).one()
    return int(row[0]), int(row[1])
