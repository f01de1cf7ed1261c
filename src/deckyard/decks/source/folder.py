"""Loads a deck from a folder on disk (`deck.toml`, the theme, `pages/`, `assets/`).

Only those are read; symbolic links anywhere in them are refused, as in a ZIP upload.
"""

from __future__ import annotations

import os
from pathlib import Path

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import (
    ASSETS_DIR,
    MANIFEST_FILE,
    PAGES_DIR,
    assemble_deck,
    check_file_totals,
    manifest_from_toml,
    missing_manifest,
    safe_relative,
)
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits, ZipLimits


def _read_folder_file(path: Path, relative: str, limits: ZipLimits) -> bytes:
    if path.is_symlink():
        raise DeckSourceError(Code.SYMLINK, f"{relative} is a symbolic link", file=relative)
    if not path.is_file():
        raise DeckSourceError(Code.SPECIAL_FILE, f"{relative} is not a regular file", file=relative)
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise DeckSourceError(
            Code.FILE_TOO_LARGE,
            f"{relative} is {size} bytes; at most {limits.max_file_bytes} are allowed",
            file=relative,
        )
    return path.read_bytes()


def load_deck_folder(folder: Path, limits: DeckLimits) -> DeckSource:
    """Load the deck in `folder`; only `deck.toml`, the theme, `pages/` and `assets/` are read.

    Symbolic links anywhere in those are refused, as in a ZIP.
    """
    if not folder.is_dir():
        raise DeckSourceError(Code.FOLDER_NOT_FOUND, f"{folder} is not a folder")
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.is_file():
        raise missing_manifest(f"in {folder}")
    manifest = manifest_from_toml(_read_folder_file(manifest_path, MANIFEST_FILE, limits.zip))
    files: dict[str, bytes] = {}
    total = 0
    for top in (PAGES_DIR, ASSETS_DIR):
        base = folder / top.rstrip("/")
        if base.is_symlink():
            raise DeckSourceError(Code.SYMLINK, f"{top} is a symbolic link", file=top)
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            for name in sorted(dirnames):
                if (here / name).is_symlink():
                    rel = (here / name).relative_to(folder).as_posix()
                    raise DeckSourceError(Code.SYMLINK, f"{rel} is a symbolic link", file=rel)
            for name in sorted(filenames):
                rel = (here / name).relative_to(folder).as_posix()
                files[rel] = _read_folder_file(here / name, rel, limits.zip)
                total += len(files[rel])
                check_file_totals(len(files), total, limits.zip)
    if manifest.theme is not None:
        theme = safe_relative(manifest.theme, file=MANIFEST_FILE, field="theme")
        if not (folder / theme).resolve().is_relative_to(folder.resolve()):
            raise DeckSourceError(
                Code.SYMLINK, f"{theme} leads outside the deck folder", file=theme, field="theme"
            )
        if (folder / theme).is_file() and theme not in files:
            files[theme] = _read_folder_file(folder / theme, theme, limits.zip)
    return assemble_deck(manifest, files, limits)
