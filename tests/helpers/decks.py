"""Deck test helpers: the example deck as a ZIP, hostile ZIPs, decks in memory, row counts."""

from __future__ import annotations

import base64
import io
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from sqlalchemy import func, select

from deckyard.decks.schema import deck_assets, decks, page_versions, pages
from deckyard.decks.source.deck_source import DeckSource

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "launch-deck"
MANIFEST = b'title = "T"\n'
PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
)

MakeDeck = Callable[..., DeckSource]
"""Builds a `DeckSource` from page texts, assets and manifest fields (the `make_deck` fixture)."""


def folder_zip(folder: Path = EXAMPLE) -> bytes:
    """The deck in `folder` as ZIP bytes, paths relative to the folder."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return out.getvalue()


def make_zip(entries: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    """A ZIP of `entries`; with `symlink`, that name is stored as a symbolic link."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name == symlink:
                info.create_system = 3
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, data)
    return out.getvalue()


def json_deck(text: str = "# Hello", kind: str = "md") -> dict[str, object]:
    """A one-page deck in its JSON form."""
    return {
        "manifest": {"title": "Hello"},
        "pages": [{"name": "01-hello", "kind": kind, "text": text}],
    }


async def counts(app: FastAPI) -> tuple[int, int, int, int]:
    """Rows in decks, deck_assets, pages and page_versions."""
    async with app.state.db.read_connection() as conn:
        return tuple(  # type: ignore[return-value]
            [
                int((await conn.execute(select(func.count()).select_from(t))).scalar_one())
                for t in (decks, deck_assets, pages, page_versions)
            ]
        )
