"""Storage operations on decks, assets, pages and page versions (noun-first names)."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.decks.schema import asset_blobs, deck_assets, decks, page_versions, pages
from deckyard.decks.source.deck_source import (
    PAGE_EXTENSIONS,
    Asset,
    DeckManifest,
    DeckSource,
    PageKind,
    PageSource,
)
from deckyard.decks.store_assets import asset_blob_store


@dataclass(frozen=True)
class PageVersionRow:
    """One stored version of a page."""

    id: int
    page_id: int
    page_name: str
    number: int
    kind: str
    source: str
    compiled: str | None
    compiled_sha256: str | None
    validation: Any
    skipped_visual_verification: bool
    screenshot: Any
    created_at: datetime
    actor_token_id: int | None = None


@dataclass(frozen=True)
class DeckRow:
    """A deck with its pages' current versions, in order."""

    id: int
    workspace_id: str
    title: str
    manifest: dict[str, Any]
    theme_css: str
    theme_path: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    pages: list[PageVersionRow]


_VERSION_COLS = (
    page_versions.c.id,
    page_versions.c.page_id,
    pages.c.name.label("page_name"),
    page_versions.c.number,
    page_versions.c.kind,
    page_versions.c.source,
    page_versions.c.compiled,
    page_versions.c.compiled_sha256,
    page_versions.c.validation,
    page_versions.c.skipped_visual_verification,
    page_versions.c.screenshot,
    page_versions.c.created_at,
    page_versions.c.actor_token_id,
)


async def deck_insert(
    db: Database,
    conn: AsyncConnection,
    workspace_id: str,
    source: DeckSource,
    compiled: dict[str, tuple[str, str]],
    now: datetime,
) -> int:
    """Store a new deck: its manifest, assets, pages and a first version of each page.

    `compiled` maps page name to (self-contained document, sha256); a page missing from it did
    not compile and is stored with its source only.
    """
    deck_id = int(
        (
            await conn.execute(
                insert(decks)
                .values(
                    workspace_id=workspace_id,
                    title=source.manifest.title,
                    manifest=source.manifest.model_dump(mode="json"),
                    theme_css=source.theme_css,
                    theme_path=source.theme_path,
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
                .returning(decks.c.id)
            )
        ).scalar_one()
    )
    if source.assets:
        rows = [
            {
                "deck_id": deck_id,
                "path": a.path,
                "media_type": a.media_type,
                "size": len(a.data),
                "sha256": await asset_blob_store(db, conn, a.data, now),
            }
            for a in source.assets.values()
        ]
        await conn.execute(insert(deck_assets), rows)
    if not source.pages:
        return deck_id
    # Three statements for any number of pages (four a page, one by one, were the most of a
    # 100-page deck's store): the pages, their first versions, each page's current version.
    page_ids = (
        await conn.execute(
            insert(pages).returning(pages.c.id, sort_by_parameter_order=True),
            [
                {"deck_id": deck_id, "name": page.name, "position": position, "created_at": now}
                for position, page in enumerate(source.pages)
            ],
        )
    ).scalars()
    first_versions = []
    for page_id, page in zip(page_ids, source.pages, strict=True):
        doc, digest = compiled.get(page.name, (None, None))
        row = _version_row(page_id, 1, page.kind.value, page.text, doc, digest, now)
        first_versions.append(row)
    versions = (
        await conn.execute(
            insert(page_versions).returning(
                page_versions.c.page_id, page_versions.c.id, sort_by_parameter_order=True
            ),
            first_versions,
        )
    ).all()
    await conn.execute(
        update(pages)
        .where(pages.c.id == bindparam("page"))
        .values(current_version_id=bindparam("version")),
        [{"page": row.page_id, "version": row.id} for row in versions],
    )
    return deck_id


async def deck_asset_put(
    db: Database,
    conn: AsyncConnection,
    deck_id: int,
    path: str,
    media_type: str,
    data: bytes,
    now: datetime,
) -> bool:
    """Add an asset unless the deck already has one at `path`; True when it was added.

    Callers name content-addressed assets by their hash, so an existing row holds the same
    bytes and a second store of one image is a no-op.
    """
    digest = await asset_blob_store(db, conn, data, now)
    row = (
        await conn.execute(
            db.insert_ignoring_conflicts(deck_assets, index_elements=["deck_id", "path"])
            .values(
                deck_id=deck_id,
                path=path,
                media_type=media_type,
                size=len(data),
                sha256=digest,
            )
            .returning(deck_assets.c.path)
        )
    ).first()
    return row is not None


async def page_insert(
    conn: AsyncConnection, deck_id: int, name: str, position: int, now: datetime
) -> int:
    """Add a page (without versions) to a deck; a taken name fails on the unique constraint."""
    return int(
        (
            await conn.execute(
                insert(pages)
                .values(deck_id=deck_id, name=name, position=position, created_at=now)
                .returning(pages.c.id)
            )
        ).scalar_one()
    )


def _version_row(
    page_id: int,
    number: int,
    kind: str,
    source: str,
    compiled: str | None,
    compiled_sha256: str | None,
    now: datetime,
    *,
    validation: Any = None,
    skipped: bool = False,
    actor_token_id: int | None = None,
) -> dict[str, Any]:
    """A `page_versions` row's values (`page_version_insert`, and a new deck's first versions)."""
    return {
        "page_id": page_id,
        "number": number,
        "kind": kind,
        "source": source,
        "compiled": compiled,
        "compiled_sha256": compiled_sha256,
        "validation": validation,
        "skipped_visual_verification": skipped,
        "created_at": now,
        "actor_token_id": actor_token_id,
    }


async def page_version_insert(
    conn: AsyncConnection,
    page_id: int,
    kind: str,
    source: str,
    compiled: str | None,
    compiled_sha256: str | None,
    now: datetime,
    *,
    validation: Any = None,
    skipped: bool = False,
    number: int | None = None,
    actor_token_id: int | None = None,
) -> int:
    """Add a version of a page and make it current; returns the version id.

    Without `number` it is the next one. With `number` (what the writer saw as next) a
    concurrent write that took that number first makes the insert fail on the unique
    `(page_id, number)` constraint instead of silently stacking on top of it.
    """
    if number is None:
        number = await page_version_next_number(conn, page_id)
    row = _version_row(
        page_id,
        number,
        kind,
        source,
        compiled,
        compiled_sha256,
        now,
        validation=validation,
        skipped=skipped,
        actor_token_id=actor_token_id,
    )
    version_id = int(
        (
            await conn.execute(insert(page_versions).values(**row).returning(page_versions.c.id))
        ).scalar_one()
    )
    await conn.execute(
        update(pages).where(pages.c.id == page_id).values(current_version_id=version_id)
    )
    return version_id


async def page_version_next_number(conn: AsyncConnection, page_id: int) -> int:
    """The number the next version of a page would get."""
    value: int = (
        await conn.execute(
            select(func.coalesce(func.max(page_versions.c.number), 0)).where(
                page_versions.c.page_id == page_id
            )
        )
    ).scalar_one()
    return int(value) + 1


async def page_version_get(
    conn: AsyncConnection, version_id: int, deck_id: int
) -> PageVersionRow | None:
    """One version of a page of `deck_id`, or None."""
    row = (
        await conn.execute(
            select(*_VERSION_COLS)
            .select_from(page_versions.join(pages, pages.c.id == page_versions.c.page_id))
            .where(page_versions.c.id == version_id, pages.c.deck_id == deck_id)
        )
    ).first()
    return PageVersionRow(**row._asdict()) if row else None


async def page_version_by_number(
    conn: AsyncConnection, page_id: int, number: int
) -> PageVersionRow | None:
    """The version `number` of a page, or None."""
    row = (
        await conn.execute(
            select(*_VERSION_COLS)
            .select_from(page_versions.join(pages, pages.c.id == page_versions.c.page_id))
            .where(page_versions.c.page_id == page_id, page_versions.c.number == number)
        )
    ).first()
    return PageVersionRow(**row._asdict()) if row else None


async def deck_touch(conn: AsyncConnection, deck_id: int, now: datetime) -> None:
    """Bump a deck's version after one of its pages changed."""
    await conn.execute(
        update(decks)
        .where(decks.c.id == deck_id)
        .values(version=decks.c.version + 1, updated_at=now)
    )


_PAGE_FILE_EXTENSIONS = {PageKind.MARKDOWN: ".md", PageKind.HTML: ".html"}


def _listed_pages(listed: Sequence[str] | None, current: Sequence[PageVersionRow]) -> list[str]:
    """The manifest's `pages`: the deck's pages now, in showing order, as file names.

    Pages are added, renamed, reordered and deleted on their own rows, so the list the deck
    was created with goes stale; it is made from the rows on every read instead. A page keeps
    the file name it was listed under (`01-cover.htm`) while its name and kind still match.
    """
    kept: dict[tuple[str, PageKind], str] = {}
    for name in listed or []:
        stem, ext = posixpath.splitext(name)
        if ext.lower() in PAGE_EXTENSIONS:
            kept[(stem, PAGE_EXTENSIONS[ext.lower()])] = name
    out: list[str] = []
    for page in current:
        kind = PageKind(page.kind)
        out.append(kept.get((page.page_name, kind), page.page_name + _PAGE_FILE_EXTENSIONS[kind]))
    return out


async def deck_get(conn: AsyncConnection, deck_id: int, workspace_id: str) -> DeckRow | None:
    """A deck of `workspace_id` with its pages' current versions, or None.

    Its manifest's `pages` lists the pages as they are now (`_listed_pages`).
    """
    row = (
        await conn.execute(
            select(decks).where(decks.c.id == deck_id, decks.c.workspace_id == workspace_id)
        )
    ).first()
    if row is None:
        return None
    versions = await conn.execute(
        select(*_VERSION_COLS)
        .select_from(pages.join(page_versions, page_versions.c.id == pages.c.current_version_id))
        .where(pages.c.deck_id == deck_id)
        .order_by(pages.c.position)
    )
    current = [PageVersionRow(**v._asdict()) for v in versions]
    manifest = {**row.manifest, "pages": _listed_pages(row.manifest.get("pages"), current)}
    return DeckRow(
        id=row.id,
        workspace_id=row.workspace_id,
        title=row.title,
        manifest=manifest,
        theme_css=row.theme_css,
        theme_path=row.theme_path,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        pages=current,
    )


async def deck_list(conn: AsyncConnection, workspace_id: str, limit: int = 100) -> list[Any]:
    """The workspace's decks (id, title, version, dates), newest first."""
    rows = await conn.execute(
        select(decks.c.id, decks.c.title, decks.c.version, decks.c.created_at, decks.c.updated_at)
        .where(decks.c.workspace_id == workspace_id)
        .order_by(decks.c.id.desc())
        .limit(limit)
    )
    return list(rows)


async def page_find(conn: AsyncConnection, deck_id: int, name: str) -> int | None:
    """A page's id by deck and name."""
    value = (
        await conn.execute(
            select(pages.c.id).where(pages.c.deck_id == deck_id, pages.c.name == name)
        )
    ).scalar()
    return int(value) if value is not None else None


async def page_versions_list(conn: AsyncConnection, page_id: int) -> list[PageVersionRow]:
    """Every version of a page, oldest first."""
    rows = await conn.execute(
        select(*_VERSION_COLS)
        .select_from(page_versions.join(pages, pages.c.id == page_versions.c.page_id))
        .where(page_versions.c.page_id == page_id)
        .order_by(page_versions.c.number)
    )
    return [PageVersionRow(**r._asdict()) for r in rows]


async def page_version_set_screenshot(
    conn: AsyncConnection, version_id: int, pointer: dict[str, Any]
) -> bool:
    """Point a page version at its current screenshot; True when the version exists."""
    result = await conn.execute(
        update(page_versions).where(page_versions.c.id == version_id).values(screenshot=pointer)
    )
    return result.rowcount == 1


async def page_version_set_validation(
    conn: AsyncConnection, version_id: int, validation: Any
) -> None:
    """Record a page version's latest validation result."""
    await conn.execute(
        update(page_versions).where(page_versions.c.id == version_id).values(validation=validation)
    )


async def deck_source(conn: AsyncConnection, deck: DeckRow) -> DeckSource:
    """Rebuild the `DeckSource` of a stored deck from its current page versions and assets."""
    assets = {
        r.path: Asset(path=r.path, data=r.data, media_type=r.media_type)
        for r in await conn.execute(
            select(deck_assets.c.path, asset_blobs.c.data, deck_assets.c.media_type)
            .join(asset_blobs, asset_blobs.c.sha256 == deck_assets.c.sha256)
            .where(deck_assets.c.deck_id == deck.id)
        )
    }
    return DeckSource(
        manifest=DeckManifest.model_validate(deck.manifest),
        pages=[
            PageSource(name=p.page_name, kind=PageKind(p.kind), text=p.source) for p in deck.pages
        ],
        assets=assets,
        theme_css=deck.theme_css,
        theme_path=deck.theme_path,
    )
