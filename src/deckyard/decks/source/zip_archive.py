"""Loads a deck from the bytes of a ZIP upload, read with the hostile-archive checks of `zipsafe`.

The archive may hold the deck layout at its root or under one top folder (as made by zipping a
folder); macOS `__MACOSX/` entries are ignored. An archive without `deck.toml` holding one
Markdown file (and its `assets/`) is a one-file Markdown deck; one holding a reveal.js
`index.html` (and its `dist/`) is a reveal.js HTML deck.
"""

from __future__ import annotations

from collections.abc import Mapping

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import (
    ASSETS_DIR,
    MANIFEST_FILE,
    PAGES_DIR,
    assemble_deck,
    checked_manifest,
    decode_text,
    missing_manifest,
)
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_file import (
    deck_from_markdown,
    is_markdown_file,
    markdown_theme_files,
)
from deckyard.decks.source.reveal_html import deck_from_reveal_html, reveal_entry
from deckyard.decks.source.zipsafe import read_zip

_SKIPPED_TOP = ("__MACOSX/",)


def _strip_top_folder(files: dict[str, bytes]) -> dict[str, bytes]:
    """The deck's files relative to its root: the archive root or its single top folder."""
    kept = {name: data for name, data in files.items() if not name.startswith(_SKIPPED_TOP)}
    if MANIFEST_FILE in kept:
        return kept
    tops = {name.split("/", 1)[0] for name in kept}
    if len(tops) == 1 and all("/" in name for name in kept):
        top = tops.pop() + "/"
        if top + MANIFEST_FILE in kept:
            return {name[len(top) :]: data for name, data in kept.items()}
    raise missing_manifest("at the archive root or under a single top folder")


def _single_markdown(entries: Mapping[str, bytes]) -> tuple[str, str] | None:
    """(top folder prefix, file name) of the one Markdown deck of a ZIP without deck.toml."""
    kept = [n for n in entries if not n.startswith(_SKIPPED_TOP)]
    if any(n == MANIFEST_FILE or n.endswith("/" + MANIFEST_FILE) for n in kept):
        return None
    tops = {n.split("/", 1)[0] for n in kept}
    single = len(tops) == 1 and all("/" in n for n in kept)
    top = tops.pop() + "/" if single else ""
    if top in (PAGES_DIR, ASSETS_DIR) or any(n.startswith(top + PAGES_DIR) for n in kept):
        return None
    found = [n[len(top) :] for n in kept if n.startswith(top) and "/" not in n[len(top) :]]
    markdown = [n for n in found if is_markdown_file(n)]
    return (top, markdown[0]) if len(markdown) == 1 else None


def _reveal_top(entries: Mapping[str, bytes]) -> tuple[str, str] | None:
    """The folder prefix and HTML file of a reveal.js deck in a ZIP without deck.toml."""
    kept = [n for n in entries if not n.startswith(_SKIPPED_TOP)]
    if any(n == MANIFEST_FILE or n.endswith("/" + MANIFEST_FILE) for n in kept):
        return None
    tops = {n.split("/", 1)[0] for n in kept}
    top = tops.pop() + "/" if len(tops) == 1 and all("/" in n for n in kept) else ""
    names = [n[len(top) :] for n in kept if n.startswith(top) and "/" not in n[len(top) :]]
    entry = reveal_entry(
        names,
        lambda name: entries[top + name].decode("utf-8", errors="replace"),
        f"the ZIP's {top or 'top'} folder",
    )
    return None if entry is None else (top, entry)


def load_deck_zip(data: bytes, limits: DeckLimits) -> DeckSource:
    """Load a deck from ZIP bytes after the checks in `zipsafe.read_zip`."""
    if len(data) > limits.max_body_bytes:
        raise DeckSourceError(
            Code.BODY_TOO_LARGE,
            f"the upload is {len(data)} bytes; at most {limits.max_body_bytes} are allowed",
        )
    entries = read_zip(data, limits.zip)
    markdown = _single_markdown(entries)
    if markdown is not None:
        top, name = markdown
        text = decode_text(entries[top + name], name)
        files = {k[len(top) :]: v for k, v in entries.items() if k.startswith(top + ASSETS_DIR)}
        for theme in markdown_theme_files(text):
            if top + theme in entries:
                files[theme] = entries[top + theme]

        def read_import(path: str) -> str | None:
            found = entries.get(top + path)
            return None if found is None else decode_text(found, path)

        return deck_from_markdown(text, name, files, limits, read_import=read_import)
    reveal = _reveal_top(entries)
    if reveal is not None:
        top, entry = reveal
        files = {k[len(top) :]: v for k, v in entries.items() if k.startswith(top)}
        text = decode_text(files[entry], entry)
        return deck_from_reveal_html(text, files, limits, filename=entry)
    files = _strip_top_folder(entries)
    manifest = checked_manifest(files[MANIFEST_FILE], files, limits)
    return assemble_deck(manifest, files, limits)
