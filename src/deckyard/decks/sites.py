"""`SiteService`: reads and manages hosted sites for the API (the writes that go live are the
`site.go_live` job's, in `decks/jobs/site_jobs.py`).

It answers which publication is live, serves its files (checking visibility and share links),
unpublishes, changes visibility, manages share links, and deletes the files of publications
that ended (`purge_ended`, for the retention sweeper).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.site.hosting import (
    CONTENT_SECURITY_POLICY,
    PublicationStatus,
    ShareTokenError,
    SiteCode,
    Visibility,
    cache_control_of,
    etag_of,
    is_content_hashed,
    is_safe_site_path,
    share_token_read,
    share_token_sign,
)
from deckyard.decks.store_sites import (
    PublicationRow,
    ShareLinkRow,
    publication_files_deleted,
    publication_list,
    publication_set_visibility,
    publications_ended,
    share_link_get,
    share_link_insert,
    share_link_list,
    share_link_revoke,
    site_key_get,
    site_live,
    site_unpublish,
)

INDEX = "index.html"
EARLIER_PUBLICATIONS = 10
"""How many of a deck's latest publications a hashed file the live one lacks is looked up in."""


class SiteRefused(Exception):
    """A site request that is answered with `status` and `code` (404 or 403)."""

    def __init__(self, status: int, code: SiteCode, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class SiteFile:
    """One file of a live publication, ready to answer: what the response needs."""

    path: str
    size: int
    sha256: str
    content_type: str
    etag: str
    cache_control: str
    store_key: str
    publication_id: int
    headers: dict[str, str]


@dataclass(frozen=True)
class ShareLink:
    """A share link with its token and URL (only known when it is made or listed)."""

    row: ShareLinkRow
    token: str
    url: str


def site_url(workspace_id: str, deck_id: int) -> str:
    """The stable path of a deck's hosted site."""
    return f"/sites/{workspace_id}/{deck_id}/"


class SiteService:
    """Hosted sites for one database and artefact store."""

    def __init__(
        self, db: Database, store: ArtifactStore, settings: Settings, clock: Clock
    ) -> None:
        self.db = db
        self.store = store
        self.settings = settings
        self.clock = clock
        self._key: str | None = settings.site_signing_key

    async def _signing_key(self) -> str:
        if self._key is None:
            async with self.db.read_connection() as conn:
                self._key = await site_key_get(conn)
        return self._key

    async def live(self, workspace_id: str, deck_id: int) -> PublicationRow | None:
        """The deck's live publication, or None."""
        async with self.db.read_connection() as conn:
            return await site_live(conn, workspace_id, deck_id)

    async def publications(self, deck_id: int, limit: int) -> list[PublicationRow]:
        """The deck's publications, newest first."""
        async with self.db.read_connection() as conn:
            return await publication_list(conn, deck_id, limit)

    async def file(
        self, workspace_id: str, deck_id: int, path: str, *, share_token: str | None = None
    ) -> SiteFile:
        """The live publication's file at `path` (`""` is the index); raises `SiteRefused`.

        A private publication is served only with a valid share link of this deck; without one
        it answers 404, as an unpublished deck does, so private decks are not discoverable.
        """
        gone = SiteRefused(404, SiteCode.SITE_NOT_FOUND, f"deck {deck_id} has no published site")
        if share_token is not None:
            await self.check_share_token(deck_id, share_token)
        live = await self.live(workspace_id, deck_id)
        if live is None:
            raise gone
        visibility = Visibility(live.visibility)
        if visibility is Visibility.PRIVATE and share_token is None:
            raise gone
        path = path or INDEX
        source, entry = live, live.file(path) if is_safe_site_path(path) else None
        if entry is None and is_content_hashed(path) and is_safe_site_path(path):
            source, entry = await self._earlier(live, path)
        if entry is None:
            raise SiteRefused(404, SiteCode.SITE_NOT_FOUND, f"the site has no file {path!r}")
        shared = share_token is not None
        headers = {
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer" if shared else "strict-origin-when-cross-origin",
        }
        return SiteFile(
            path=path,
            size=int(entry["size"]),
            sha256=str(entry["sha256"]),
            content_type=str(entry["content_type"]),
            etag=etag_of(str(entry["sha256"])),
            cache_control=cache_control_of(path, Visibility.PRIVATE if shared else visibility),
            store_key=source.store_prefix + path,
            publication_id=source.id,
            headers=headers,
        )

    async def _earlier(
        self, live: PublicationRow, path: str
    ) -> tuple[PublicationRow, dict[str, Any] | None]:
        """A content-hashed file the live publication lacks, from a superseded one of the same
        deck and visibility whose files are still kept.

        A browser that loaded the previous `index.html` just before a switch asks for the
        previous pages by their hashed names; a hashed name always means the same bytes, so
        serving them from the older publication is exact, and keeps "immutable" true.
        """
        async with self.db.read_connection() as conn:
            recent = await publication_list(conn, live.deck_id, EARLIER_PUBLICATIONS)
        for p in recent:
            if (
                p.status == PublicationStatus.SUPERSEDED.value
                and p.visibility == live.visibility
                and p.files_deleted_at is None
                and (entry := p.file(path)) is not None
            ):
                return p, entry
        return live, None

    async def read(self, found: SiteFile) -> bytes:
        """The bytes of a file `file()` found; 404 if the store lost them meanwhile."""
        data = await self.store.get(found.store_key)
        if data is None:
            raise SiteRefused(404, SiteCode.SITE_NOT_FOUND, f"the site has no file {found.path!r}")
        return data

    async def check_share_token(self, deck_id: int, token: str) -> ShareLinkRow:
        """The share link `token` stands for, if it is signed for this deck, not expired and not
        revoked; raises `SiteRefused` (403) otherwise."""
        try:
            claim = share_token_read(
                await self._signing_key(), token, deck_id, self.clock.now().timestamp()
            )
        except ShareTokenError as exc:
            raise SiteRefused(403, exc.code, exc.message) from None
        async with self.db.read_connection() as conn:
            link = await share_link_get(conn, claim.link_id)
        if link is None or link.deck_id != deck_id:
            raise SiteRefused(403, SiteCode.SHARE_LINK_INVALID, "the share link is unknown")
        if link.revoked_at is not None:
            raise SiteRefused(403, SiteCode.SHARE_LINK_REVOKED, "the share link was revoked")
        return link

    async def unpublish(self, workspace_id: str, deck_id: int) -> int | None:
        """Take the deck's site down; the publication that was live, or None if none was."""
        now = self.clock.now()
        return await self.db.write(
            lambda conn: site_unpublish(self.db, conn, deck_id, workspace_id, now)
        )

    async def set_visibility(
        self, workspace_id: str, deck_id: int, visibility: Visibility
    ) -> PublicationRow | None:
        """Change the live publication's visibility; None when nothing is live."""

        async def change(conn: AsyncConnection) -> PublicationRow | None:
            live = await site_live(conn, workspace_id, deck_id)
            if live is None:
                return None
            await publication_set_visibility(conn, live.id, visibility)
            return await site_live(conn, workspace_id, deck_id)

        return await self.db.write(change)

    # --- share links ----------------------------------------------------------------------------

    async def _link(self, row: ShareLinkRow) -> ShareLink:
        token = share_token_sign(
            await self._signing_key(), row.id, row.deck_id, int(row.expires_at.timestamp())
        )
        return ShareLink(row, token, f"{site_url(row.workspace_id, row.deck_id)}_share/{token}/")

    async def share_link_create(
        self,
        workspace_id: str,
        deck_id: int,
        expires_in_seconds: float,
        label: str | None,
        token_id: int | None,
    ) -> ShareLink:
        """A new share link valid for `expires_in_seconds` (whole seconds)."""
        now = self.clock.now()
        expires = now.replace(microsecond=0) + timedelta(seconds=int(expires_in_seconds))
        link_id = await self.db.write(
            lambda conn: share_link_insert(
                conn, deck_id, workspace_id, label, expires, token_id, now
            )
        )
        async with self.db.read_connection() as conn:
            row = await share_link_get(conn, link_id)
        assert row is not None
        return await self._link(row)

    async def share_links(self, deck_id: int) -> list[ShareLink]:
        """The deck's share links, newest first, with their tokens."""
        async with self.db.read_connection() as conn:
            rows = await share_link_list(conn, deck_id)
        return [await self._link(r) for r in rows]

    async def share_link_revoke(self, deck_id: int, link_id: int) -> bool:
        """Revoke one of the deck's share links; False when it has no such link."""
        now = self.clock.now()
        return await self.db.write(lambda conn: share_link_revoke(conn, deck_id, link_id, now))

    # --- retention ------------------------------------------------------------------------------

    async def purge_ended(self, limit: int) -> int:
        """Delete the store files of up to `limit` publications that ended (or stayed staged)
        more than `site_purge_grace_seconds` ago; how many publications were purged.

        The grace lets a reader that resolved the old publication just before a switch finish
        its request. Files go first, then the row records it, so a crash in between leaves a
        purge that the next pass redoes.
        """
        now = self.clock.now()
        before = now - timedelta(seconds=self.settings.site_purge_grace_seconds)
        async with self.db.read_connection() as conn:
            ended = await publications_ended(conn, before, limit)
        for publication in ended:
            for entry in publication.files:
                await self.store.delete(publication.store_prefix + str(entry["path"]))
            await self.db.write(self._mark_purged(publication.id, now))
        return len(ended)

    @staticmethod
    def _mark_purged(
        publication_id: int, now: datetime
    ) -> Callable[[AsyncConnection], Awaitable[bool]]:
        async def mark(conn: AsyncConnection) -> bool:
            return await publication_files_deleted(conn, publication_id, now)

        return mark
