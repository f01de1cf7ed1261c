"""Loads a deck from the bytes of a ZIP upload, read with the hostile-archive checks of `zipsafe`.

The archive may hold the deck layout at its root or under one top folder (as made by zipping a
folder); macOS `__MACOSX/` entries are ignored.
"""

from __future__ import annotations

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import (
    MANIFEST_FILE,
    assemble_deck,
    manifest_from_toml,
    missing_manifest,
)
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits
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


def load_deck_zip(data: bytes, limits: DeckLimits) -> DeckSource:
    """Load a deck from ZIP bytes after the checks in `zipsafe.read_zip`."""
    if len(data) > limits.max_body_bytes:
        raise DeckSourceError(
            Code.BODY_TOO_LARGE,
            f"the upload is {len(data)} bytes; at most {limits.max_body_bytes} are allowed",
        )
    files = _strip_top_folder(read_zip(data, limits.zip))
    manifest = manifest_from_toml(files[MANIFEST_FILE])
    return assemble_deck(manifest, files, limits)
