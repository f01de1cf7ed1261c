"""Storage operations on publications, the live pointer per deck and share links.

A deck's live site is the `deck_sites` row's `publication_id`: going live and unpublishing are
one compare-and-set `UPDATE` of that row, so a reader (one `SELECT` joining the pointer and
its publication) sees the old publication or the new one, never a mix. A publication's files
sit in the artefact store under its `store_prefix`; its `files` list names each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.decks.schema import deck_sites, publications, share_links, site_keys
from deckyard.decks.site.hosting import ENDED, PublicationStatus, Visibility


@dataclass(frozen=True)
class PublicationRow:
    """One publication of a deck's site."""

    id: int
    deck_id: int
    workspace_id: str
    task_id: int | None
    status: str
    visibility: str
    deck_version: int
    site_version: str
    site_key: str
    site_sha256: str
    store_prefix: str
    files: list[dict[str, Any]]
    actor_token_id: int | None
    created_at: datetime
    live_at: datetime | None
    ended_at: datetime | None
    files_deleted_at: datetime | None

    def file(self, path: str) -> dict[str, Any] | None:
        """The entry of `path` in this publication's files, or None."""
        return next((f for f in self.files if f.get("path") == path), None)


@dataclass(frozen=True)
class ShareLinkRow:
    """A share link of a deck (its token is derived, never stored)."""

    id: int
    deck_id: int
    workspace_id: str
    label: str | None
    expires_at: datetime
    created_by_token_id: int | None
    created_at: datetime
    revoked_at: datetime | None


def _publication(row: Any) -> PublicationRow:
    values = dict(row._mapping)
    values["files"] = list(values["files"] or [])
    return PublicationRow(**{k: values[k] for k in PublicationRow.__dataclass_fields__})


async def publication_by_task(conn: AsyncConnection, task_id: int) -> PublicationRow | None:
    """The publication a publish task made, if it made one."""
    row = (
        await conn.execute(select(publications).where(publications.c.task_id == task_id))
    ).first()
    return _publication(row) if row else None


async def publication_get(conn: AsyncConnection, publication_id: int) -> PublicationRow | None:
    """One publication by id."""
    row = (
        await conn.execute(select(publications).where(publications.c.id == publication_id))
    ).first()
    return _publication(row) if row else None


async def publication_stage(
    db: Database, conn: AsyncConnection, values: dict[str, Any]
) -> PublicationRow:
    """Insert a `staged` publication for `values["task_id"]`, or return the one it has.

    Staged first, before any file is stored, so a store sweeper finds the prefix referenced.
    """
    stmt = (
        db.insert_ignoring_conflicts(publications, index_elements=["task_id"])
        .values(status=PublicationStatus.STAGED.value, **values)
        .returning(publications.c.id)
    )
    await conn.execute(stmt)
    found = await publication_by_task(conn, int(values["task_id"]))
    if found is None:
        raise RuntimeError(f"publication of task {values['task_id']} vanished")
    return found


async def publication_set_files(
    conn: AsyncConnection, publication_id: int, files: list[dict[str, Any]]
) -> bool:
    """Record the stored files of a still-staged publication."""
    done = await conn.execute(
        update(publications)
        .where(
            publications.c.id == publication_id,
            publications.c.status == PublicationStatus.STAGED.value,
        )
        .values(files=files)
    )
    return done.rowcount == 1


@dataclass(frozen=True)
class Switch:
    """What going live did: whether this publication is live, and which one it replaced."""

    live: bool
    previous: int | None


async def _pointer(conn: AsyncConnection, deck_id: int) -> tuple[bool, int | None, int | None]:
    """Whether the deck has a pointer row, the publication it names and that one's task."""
    row = (
        await conn.execute(
            select(deck_sites.c.publication_id, publications.c.task_id)
            .select_from(
                deck_sites.outerjoin(publications, publications.c.id == deck_sites.c.publication_id)
            )
            .where(deck_sites.c.deck_id == deck_id)
        )
    ).first()
    if row is None:
        return False, None, None
    return True, row.publication_id, row.task_id


def _pointer_is(current: int | None) -> Any:
    column = deck_sites.c.publication_id
    return column.is_(None) if current is None else column == current


async def _pointer_cas(
    db: Database,
    conn: AsyncConnection,
    deck_id: int,
    workspace_id: str,
    new: int | None,
    now: datetime,
    new_task: int | None = None,
) -> tuple[bool, int | None, bool]:
    """Move the deck's pointer to `new` if it still holds what was read.

    Answers (moved, what it held, whether what it held came from a later publish task than
    `new_task`); not moved and not newer means another writer won the race (read again).
    """
    exists, current, current_task = await _pointer(conn, deck_id)
    if not exists:
        made = await conn.execute(
            db.insert_ignoring_conflicts(deck_sites, index_elements=["deck_id"])
            .values(deck_id=deck_id, workspace_id=workspace_id, publication_id=new, updated_at=now)
            .returning(deck_sites.c.deck_id)
        )
        return made.first() is not None, None, False
    if new_task is not None and current_task is not None and current_task > new_task:
        return False, current, True
    done = await conn.execute(
        update(deck_sites)
        .where(deck_sites.c.deck_id == deck_id, _pointer_is(current))
        .values(publication_id=new, updated_at=now)
    )
    return done.rowcount == 1, current, False


async def site_go_live(
    db: Database, conn: AsyncConnection, publication: PublicationRow, now: datetime
) -> Switch:
    """Make a staged publication the deck's live one, unless a newer one is live already.

    The pointer moves by compare-and-set on the id it held; the replaced publication becomes
    `superseded`. A publication whose publish task started before the live one's is
    superseded at once (publishes that finish out of order never roll a site back).
    """
    if publication.status != PublicationStatus.STAGED.value or publication.files_deleted_at:
        return Switch(publication.status == PublicationStatus.LIVE.value, None)
    for _ in range(5):
        moved, previous, newer = await _pointer_cas(
            db,
            conn,
            publication.deck_id,
            publication.workspace_id,
            publication.id,
            now,
            publication.task_id,
        )
        if newer:
            await _publication_end(conn, publication.id, PublicationStatus.SUPERSEDED, now)
            return Switch(False, previous)
        if not moved:
            continue
        await conn.execute(
            update(publications)
            .where(
                publications.c.id == publication.id,
                publications.c.status == PublicationStatus.STAGED.value,
            )
            .values(status=PublicationStatus.LIVE.value, live_at=now)
        )
        if previous is not None:
            await _publication_end(conn, previous, PublicationStatus.SUPERSEDED, now)
        return Switch(True, previous)
    raise RuntimeError(f"deck {publication.deck_id}: the site pointer kept moving")


async def _publication_end(
    conn: AsyncConnection, publication_id: int, status: PublicationStatus, now: datetime
) -> None:
    await conn.execute(
        update(publications)
        .where(
            publications.c.id == publication_id,
            publications.c.status.in_(
                [PublicationStatus.LIVE.value, PublicationStatus.STAGED.value]
            ),
        )
        .values(status=status.value, ended_at=now)
    )


async def site_unpublish(
    db: Database, conn: AsyncConnection, deck_id: int, workspace_id: str, now: datetime
) -> int | None:
    """Take the deck's site down (pointer to NULL); the publication that was live, or None."""
    for _ in range(5):
        exists, current, _ = await _pointer(conn, deck_id)
        if not exists or current is None:
            return None
        moved, _, _ = await _pointer_cas(db, conn, deck_id, workspace_id, None, now)
        if not moved:
            continue
        await _publication_end(conn, current, PublicationStatus.UNPUBLISHED, now)
        return current
    raise RuntimeError(f"deck {deck_id}: the site pointer kept moving")


async def site_live(
    conn: AsyncConnection, workspace_id: str, deck_id: int
) -> PublicationRow | None:
    """The deck's live publication in one read of the pointer and its row, or None."""
    row = (
        await conn.execute(
            select(publications)
            .select_from(
                deck_sites.join(publications, publications.c.id == deck_sites.c.publication_id)
            )
            .where(deck_sites.c.deck_id == deck_id, deck_sites.c.workspace_id == workspace_id)
        )
    ).first()
    return _publication(row) if row else None


async def publication_list(conn: AsyncConnection, deck_id: int, limit: int) -> list[PublicationRow]:
    """A deck's publications, newest first."""
    rows = await conn.execute(
        select(publications)
        .where(publications.c.deck_id == deck_id)
        .order_by(publications.c.id.desc())
        .limit(limit)
    )
    return [_publication(r) for r in rows]


async def publication_set_visibility(
    conn: AsyncConnection, publication_id: int, visibility: Visibility
) -> bool:
    """Change who may read a publication."""
    done = await conn.execute(
        update(publications)
        .where(publications.c.id == publication_id)
        .values(visibility=visibility.value)
    )
    return done.rowcount == 1


async def publications_ended(
    conn: AsyncConnection, ended_before: datetime, limit: int
) -> list[PublicationRow]:
    """Publications whose files nobody serves, oldest first: what a retention pass may delete.

    Those are superseded or unpublished ones that ended before `ended_before`, and staged ones
    created before it (their publish failed or was cancelled before going live).
    """
    rows = await conn.execute(
        select(publications)
        .where(
            or_(
                and_(
                    publications.c.status.in_([s.value for s in ENDED]),
                    publications.c.ended_at < ended_before,
                ),
                and_(
                    publications.c.status == PublicationStatus.STAGED.value,
                    publications.c.created_at < ended_before,
                ),
            ),
            publications.c.files_deleted_at.is_(None),
        )
        .order_by(publications.c.id)
        .limit(limit)
    )
    return [_publication(r) for r in rows]


async def publication_files_deleted(
    conn: AsyncConnection, publication_id: int, now: datetime
) -> bool:
    """Record that a publication's files are gone from the store (never a live one's)."""
    done = await conn.execute(
        update(publications)
        .where(
            publications.c.id == publication_id,
            publications.c.status != PublicationStatus.LIVE.value,
            publications.c.files_deleted_at.is_(None),
        )
        .values(files_deleted_at=now)
    )
    return done.rowcount == 1


async def publication_store_prefixes(conn: AsyncConnection) -> set[str]:
    """Every store prefix a publication still refers to (its files are not deleted yet)."""
    rows = await conn.execute(
        select(publications.c.store_prefix).where(publications.c.files_deleted_at.is_(None))
    )
    return {r.store_prefix for r in rows}


def _publication_prefix(key: str) -> str | None:
    parts = key.split("/")
    return "/".join(parts[:4]) + "/" if len(parts) > 4 and parts[0] == "sites" else None


async def publication_keys_referenced(conn: AsyncConnection, keys: Sequence[str]) -> set[str]:
    """Those of `keys` that a publication refers to: every key under the `store_prefix`
    (`sites/{workspace}/{deck}/publish-{task}/`) of a publication whose files are not deleted
    (live, staged, or ended and not purged yet). For the store sweeper's referrer list."""
    wanted = {k for k in keys if _publication_prefix(k) is not None}
    if not wanted:
        return set()
    prefixes = await publication_store_prefixes(conn)
    return {k for k in wanted if _publication_prefix(k) in prefixes}


# --- share links ------------------------------------------------------------------------------


async def share_link_insert(
    conn: AsyncConnection,
    deck_id: int,
    workspace_id: str,
    label: str | None,
    expires_at: datetime,
    token_id: int | None,
    now: datetime,
) -> int:
    """Store a new share link; its id."""
    made = await conn.execute(
        insert(share_links)
        .values(
            deck_id=deck_id,
            workspace_id=workspace_id,
            label=label,
            expires_at=expires_at,
            created_by_token_id=token_id,
            created_at=now,
        )
        .returning(share_links.c.id)
    )
    return int(made.scalar_one())


def _link(row: Any) -> ShareLinkRow:
    return ShareLinkRow(**{k: row._mapping[k] for k in ShareLinkRow.__dataclass_fields__})


async def share_link_get(conn: AsyncConnection, link_id: int) -> ShareLinkRow | None:
    """One share link by id."""
    row = (await conn.execute(select(share_links).where(share_links.c.id == link_id))).first()
    return _link(row) if row else None


async def share_link_list(conn: AsyncConnection, deck_id: int) -> list[ShareLinkRow]:
    """A deck's share links, newest first (revoked and expired ones included)."""
    rows = await conn.execute(
        select(share_links)
        .where(share_links.c.deck_id == deck_id)
        .order_by(share_links.c.id.desc())
    )
    return [_link(r) for r in rows]


async def share_link_revoke(
    conn: AsyncConnection, deck_id: int, link_id: int, now: datetime
) -> bool:
    """Revoke a deck's share link; False when there is no such link (revoking twice is fine)."""
    done = await conn.execute(
        update(share_links)
        .where(share_links.c.id == link_id, share_links.c.deck_id == deck_id)
        .values(revoked_at=func.coalesce(share_links.c.revoked_at, now))
    )
    return done.rowcount == 1


async def site_key_get(conn: AsyncConnection) -> str:
    """The key share links are signed with (made by migration 0009)."""
    row = (await conn.execute(select(site_keys.c.key).where(site_keys.c.id == 1))).first()
    if row is None:
        raise RuntimeError("site_keys row is missing: run `deckyard migrate`")
    return str(row.key)
