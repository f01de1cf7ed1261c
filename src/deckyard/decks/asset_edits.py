"""Upload, replace and delete a deck's assets: types sniffed from content, references checked.

The media type comes from the bytes (`filetype` reads magic numbers), never from the name or
the client's `Content-Type`; the name's extension must agree with it. Text formats have no
magic number: SVG is recognised by its root element, and CSS, JSON, JavaScript and plain text
are accepted when the name says so and the bytes are UTF-8.

Deleting an asset that a page, the theme or a font still refers to is refused with every
reference (page, line, reference) unless forced: the deck is compiled without the asset and
the problems that appear are exactly those references (a manifest font's is on `deck.toml`).
A forced delete also drops the manifest's font entries for that file in the same write: the
font was the file, and a declaration of a missing file would fail every page of the deck.
References from pages or the theme stay, and are compile problems of those pages until fixed.

Replacing an asset that pages use goes through the write gate, as a theme edit does: `put`
stores the new bytes as a content-addressed blob (harmless until an asset row points at it; the
sweep removes it if the edit never lands) and answers `StagedReplace`; the caller enqueues
`deck.style` with the asset, which re-validates exactly the pages that use it and repoints the
asset only when every one of them passed.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass

import filetype
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.db import Database
from deckyard.decks.compile.documents import compile_deck_report
from deckyard.decks.errors import CompileProblem
from deckyard.decks.source.deck_source import MEDIA_TYPES, DeckSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.store import deck_get, deck_source, deck_touch
from deckyard.decks.store_assets import (
    AssetWrite,
    asset_blob_store,
    deck_asset_delete,
    deck_asset_sha256,
    deck_asset_upsert,
)
from deckyard.decks.store_pages import deck_lock, deck_style_set

TEXT_TYPES = frozenset({"text/css", "text/javascript", "application/json", "text/plain"})
_SNIFFED_ALIASES = {
    "application/font-sfnt": "font/ttf",
    "application/font-woff": "font/woff",
    "image/x-icon": "image/x-icon",
    "image/vnd.microsoft.icon": "image/x-icon",
    "audio/x-wav": "audio/wav",
    "audio/mp3": "audio/mpeg",
}
_SVG_ROOT = re.compile(rb"^\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*|<!DOCTYPE[^>]*>\s*)*<svg[\s>]", re.S)
_ASSET_PATH = re.compile(r"^assets/[A-Za-z0-9._@+-]+(/[A-Za-z0-9._@+-]+)*$")


class AssetRefused(Exception):
    """An asset upload or delete that was refused; `field` names what was wrong."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        references: list[CompileProblem] | None = None,
        current: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.references = references or []
        self.current = current


@dataclass(frozen=True)
class StoredAsset:
    """An asset as stored: path, sniffed media type, size and content hash."""

    path: str
    media_type: str
    size: int
    sha256: str
    created: bool


@dataclass(frozen=True)
class StagedReplace:
    """A replacement that pages use: its bytes are stored, the gate decides whether it lands."""

    path: str
    media_type: str
    size: int
    sha256: str
    pages: list[str]

    def payload(self) -> dict[str, object]:
        """The `asset` part of a `deck.style` job's payload."""
        return {
            "path": self.path,
            "media_type": self.media_type,
            "sha256": self.sha256,
            "pages": self.pages,
        }


def asset_users(source: DeckSource, path: str, limits: DeckLimits) -> list[CompileProblem]:
    """The references to `path` in the deck: compile problems that appear once it is gone."""
    before = {_key(p) for p in compile_deck_report(source, limits).problems}
    without = source.model_copy(
        update={"assets": {k: v for k, v in source.assets.items() if k != path}}
    )
    after = compile_deck_report(without, limits).problems
    return [p for p in after if _key(p) not in before]


def check_asset_path(path: str) -> str:
    """`path` when it names a file under `assets/` without `..`, hidden or odd parts."""
    normal = posixpath.normpath(path)
    parts = normal.split("/")
    if normal != path or not _ASSET_PATH.match(path) or any(p.startswith(".") for p in parts):
        raise AssetRefused(
            422,
            "ASSET_PATH_INVALID",
            "path: an asset lives under assets/ (letters, digits, '.', '_', '-', '@', '+')",
            field="path",
        )
    return path


def sniff_media_type(path: str, data: bytes) -> str:
    """The media type of `data`, read from its bytes; refused when the name disagrees."""
    by_name = MEDIA_TYPES.get(posixpath.splitext(path)[1].lower())
    if by_name is None:
        raise AssetRefused(
            415,
            "ASSET_TYPE_UNSUPPORTED",
            f"path: {path!r} has no supported extension",
            field="path",
        )
    guessed = filetype.guess_mime(data)
    sniffed = _SNIFFED_ALIASES.get(guessed, guessed) if guessed else None
    if sniffed is None and _SVG_ROOT.match(data[:4096]):
        sniffed = "image/svg+xml"
    if sniffed is None and by_name in TEXT_TYPES:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise AssetRefused(
                415, "ASSET_TYPE_UNKNOWN", "body: text assets must be UTF-8", field="body"
            ) from None
        sniffed = by_name
    if sniffed is None:
        raise AssetRefused(
            415, "ASSET_TYPE_UNKNOWN", "body: the content's type is not recognised", field="body"
        )
    same_font = sniffed.startswith("font/") and by_name.startswith("font/")
    if sniffed != by_name and not same_font:
        raise AssetRefused(
            415,
            "ASSET_TYPE_MISMATCH",
            f"body: the content is {sniffed}, but {path!r} says {by_name}",
            field="body",
        )
    return by_name if same_font else sniffed


class AssetEdits:
    """Asset writes of a deck the caller owns (checked before)."""

    def __init__(self, db: Database, limits: DeckLimits, max_bytes: int, clock: Clock) -> None:
        self.db = db
        self.limits = limits
        self.max_bytes = max_bytes
        self.clock = clock

    async def put(
        self,
        workspace_id: str,
        deck_id: int,
        path: str,
        data: bytes,
        base: int | None = None,
    ) -> StoredAsset | StagedReplace:
        """Store `data` at `path` (new or replacing), typed by its content; `base`: If-Match.

        A new asset, or a replacement no page uses, is written at once (`StoredAsset`); a
        replacement that pages use is only staged (`StagedReplace`) for the write gate.
        """
        check_asset_path(path)
        if len(data) > self.max_bytes:
            raise AssetRefused(
                413, "ASSET_TOO_LARGE", f"body: over {self.max_bytes} bytes", field="body"
            )
        if not data:
            raise AssetRefused(422, "ASSET_EMPTY", "body: an asset cannot be empty", field="body")
        media_type = sniff_media_type(path, data)

        async def put(conn: AsyncConnection) -> AssetWrite | StagedReplace:
            await _locked(conn, deck_id, base)
            now = self.clock.now()
            current = await deck_asset_sha256(conn, deck_id, path)
            if current is not None and current != hashlib.sha256(data).hexdigest():
                users = await self._users(conn, workspace_id, deck_id, path)
                if users:
                    digest = await asset_blob_store(self.db, conn, data, now)
                    return StagedReplace(path, media_type, len(data), digest, users)
            stored = await deck_asset_upsert(self.db, conn, deck_id, path, media_type, data, now)
            await deck_touch(conn, deck_id, now)
            return stored

        stored = await self.db.write(put)
        if isinstance(stored, StagedReplace):
            return stored
        return StoredAsset(path, media_type, len(data), stored.sha256, stored.created)

    async def _users(
        self, conn: AsyncConnection, workspace_id: str, deck_id: int, path: str
    ) -> list[str]:
        row = await deck_get(conn, deck_id, workspace_id)
        if row is None:
            return []
        source = await deck_source(conn, row)
        return sorted({p.page for p in asset_users(source, path, self.limits)})

    async def delete(
        self, workspace_id: str, deck_id: int, path: str, *, force: bool, base: int | None = None
    ) -> bool:
        """Delete an asset; refused while referenced unless `force`. False when not there.

        A forced delete drops the manifest's fonts that name the file in the same write.
        """

        async def delete(conn: AsyncConnection) -> bool:
            await _locked(conn, deck_id, base)
            row = await deck_get(conn, deck_id, workspace_id)
            if row is None:
                return False
            source = await deck_source(conn, row)
            if path not in source.assets:
                return False
            if not force:
                references = asset_users(source, path, self.limits)
                if references:
                    raise AssetRefused(
                        409,
                        "ASSET_IN_USE",
                        f"{path} is still referenced {len(references)} time(s); "
                        "fix the pages or delete with force=true",
                        field="path",
                        references=references,
                    )
            await deck_asset_delete(conn, deck_id, path)
            fonts = [f for f in source.manifest.fonts if posixpath.normpath(f.file) != path]
            if len(fonts) != len(source.manifest.fonts):
                manifest = source.manifest.model_copy(update={"fonts": fonts})
                await deck_style_set(
                    conn, deck_id, manifest.model_dump(mode="json"), row.theme_css, row.theme_path
                )
            await deck_touch(conn, deck_id, self.clock.now())
            return True

        return await self.db.write(delete)


async def _locked(conn: AsyncConnection, deck_id: int, base: int | None) -> None:
    head = await deck_lock(conn, deck_id)
    if head is None:
        raise AssetRefused(404, "NOT_FOUND", f"no deck {deck_id}")
    if base is not None and head != base:
        raise AssetRefused(
            409,
            "EDIT_CONFLICT",
            f"deck {deck_id} is at version {head}, not {base}; reload and edit again",
            field="If-Match",
            current=head,
        )


def _key(p: CompileProblem) -> tuple[str, str | None, int | None, str]:
    return (p.page, p.reference, p.line, p.code)
