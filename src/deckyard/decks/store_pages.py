"""Storage operations that guard and change a deck's set of pages (noun-first names).

Optimistic concurrency rests on two row locks: `page_lock` before a page gets a new version and
`deck_lock` before the deck's page set changes. On PostgreSQL the `UPDATE` takes the row lock,
so a concurrent writer waits and then reads the committed head; on SQLite the write transaction
already holds the database's one writer lock. Either way the caller compares the head it reads
after locking with the version the client based its edit on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.decks.schema import deck_assets, decks, page_versions, pages


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


async def deck_screenshot_keys(conn: AsyncConnection, deck_id: int) -> list[str]:
    """The artefact keys of every screenshot a version of the deck's pages points at."""
    rows = await conn.execute(
        select(page_versions.c.screenshot)
        .select_from(page_versions.join(pages, pages.c.id == page_versions.c.page_id))
        .where(pages.c.deck_id == deck_id, page_versions.c.screenshot.is_not(None))
    )
    keys = {
        str(r.screenshot["artifact_key"])
        for r in rows
        if isinstance(r.screenshot, dict) and r.screenshot.get("artifact_key")
    }
    return sorted(keys)


async def deck_delete(conn: AsyncConnection, deck_id: int) -> bool:
    """Delete a deck with its pages, versions and assets; True when it existed."""
    page_ids = select(pages.c.id).where(pages.c.deck_id == deck_id).scalar_subquery()
    await conn.execute(delete(page_versions).where(page_versions.c.page_id.in_(page_ids)))
    await conn.execute(delete(pages).where(pages.c.deck_id == deck_id))
    await conn.execute(delete(deck_assets).where(deck_assets.c.deck_id == deck_id))
    return (await conn.execute(delete(decks).where(decks.c.id == deck_id))).rowcount == 1


async def deck_copy(conn: AsyncConnection, deck_id: int, title: str, now: datetime) -> int | None:
    """A new deck holding the current version of each page of `deck_id` (as version 1) and its
    assets; validation results come along (same content, same deck), screenshots do not (the
    artefacts stay the original's). None when the deck is gone.
    """
    row = (await conn.execute(select(decks).where(decks.c.id == deck_id))).first()
    if row is None:
        return None
    manifest = {**row.manifest, "title": title}
    new_id = int(
        (
            await conn.execute(
                insert(decks)
                .values(
                    workspace_id=row.workspace_id,
                    title=title,
                    manifest=manifest,
                    theme_css=row.theme_css,
                    theme_path=row.theme_path,
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
                .returning(decks.c.id)
            )
        ).scalar_one()
    )
    assets = await conn.execute(select(deck_assets).where(deck_assets.c.deck_id == deck_id))
    copied = [{**a._asdict(), "deck_id": new_id} for a in assets]
    if copied:
        await conn.execute(insert(deck_assets), copied)
    current = await conn.execute(
        select(
            pages.c.name,
            pages.c.position,
            page_versions.c.kind,
            page_versions.c.source,
            page_versions.c.compiled,
            page_versions.c.compiled_sha256,
            page_versions.c.validation,
            page_versions.c.skipped_visual_verification,
        )
        .select_from(pages.join(page_versions, page_versions.c.id == pages.c.current_version_id))
        .where(pages.c.deck_id == deck_id)
        .order_by(pages.c.position)
    )
    for p in list(current):
        page_id = int(
            (
                await conn.execute(
                    insert(pages)
                    .values(deck_id=new_id, name=p.name, position=p.position, created_at=now)
                    .returning(pages.c.id)
                )
            ).scalar_one()
        )
        version_id = int(
            (
                await conn.execute(
                    insert(page_versions)
                    .values(
                        page_id=page_id,
                        number=1,
                        kind=p.kind,
                        source=p.source,
                        compiled=p.compiled,
                        compiled_sha256=p.compiled_sha256,
                        validation=p.validation,
                        skipped_visual_verification=p.skipped_visual_verification,
                        created_at=now,
                    )
                    .returning(page_versions.c.id)
                )
            ).scalar_one()
        )
        await conn.execute(
            update(pages).where(pages.c.id == page_id).values(current_version_id=version_id)
        )
    return new_id


async def deck_style_set(
    conn: AsyncConnection,
    deck_id: int,
    manifest: dict[str, Any],
    theme_css: str,
    theme_path: str | None,
) -> None:
    """Store a deck's new manifest (its title with it) and theme."""
    await conn.execute(
        update(decks)
        .where(decks.c.id == deck_id)
        .values(
            title=str(manifest["title"]),
            manifest=manifest,
            theme_css=theme_css,
            theme_path=theme_path,
        )
    )


async def page_version_artifact_keys_referenced(
    conn: AsyncConnection, keys: Sequence[str]
) -> set[str]:
    """Those of `keys` that a page version's screenshot pointer names."""
    key = page_versions.c.screenshot["artifact_key"].as_string()
    rows = await conn.execute(select(key).where(key.in_(list(keys))))
    return {str(r[0]) for r in rows}
