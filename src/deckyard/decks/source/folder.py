"""Loads a deck from a folder on disk (`deck.toml`, the theme, `pages/`, `assets/`).

Only those are read; symbolic links anywhere in them are refused, as in a ZIP upload. A
one-file Markdown deck (`talk.md`) is read with the `assets/` folder beside it and the local
files its slides refer to.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import (
    ASSETS_DIR,
    MANIFEST_FILE,
    PAGES_DIR,
    assemble_deck,
    check_file_totals,
    checked_manifest,
    decode_text,
    missing_manifest,
    safe_relative,
)
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits, ZipLimits
from deckyard.decks.source.markdown_file import (
    deck_from_markdown,
    is_markdown_file,
    markdown_theme_files,
)
from deckyard.decks.source.references import rewrite_local
from deckyard.decks.source.reveal_html import (
    INDEX_FILE,
    deck_from_reveal_html,
    is_reveal_html,
    rebase_references,
    reveal_entry,
)
from deckyard.decks.source.slidev_imports import folder_import_reader


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


def _read_tops(folder: Path, tops: tuple[str, ...], limits: ZipLimits) -> dict[str, bytes]:
    """Every file under the folders `tops` of `folder`, keyed by deck path; symlinks refused."""
    files: dict[str, bytes] = {}
    total = 0
    for top in tops:
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
                files[rel] = _read_folder_file(here / name, rel, limits)
                total += len(files[rel])
                check_file_totals(len(files), total, limits)
    return files


def _other_files(folder: Path, limits: ZipLimits) -> frozenset[str]:
    """Names of the files under `folder` outside `assets/` and `pages/`, for messages only."""
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "node_modules"]
        if here == folder:
            dirnames[:] = [d for d in dirnames if d not in ("assets", "pages")]
        found.update((here / name).relative_to(folder).as_posix() for name in filenames)
        if len(found) >= limits.max_entries:
            break
    return frozenset(found)


def load_markdown_file(path: Path, limits: DeckLimits, *, sourced: bool = True) -> DeckSource:
    """Load the one-file Markdown deck at `path`, with the `assets/` folder beside it.

    Local files the slides refer to elsewhere (`./images/x.png`, Slidev's `/x.png` in
    `public/`) are read as assets too, as `deckyard import` copies them (`references.py`).
    `sourced` as in `deck_from_markdown`.
    """
    name = path.name
    text = decode_text(_read_folder_file(path, name, limits.zip), name)
    folder = path.parent
    files = _read_tops(folder, (ASSETS_DIR,), limits.zip)

    def carry(target: str, file: Path) -> None:
        if target not in files:
            relative = file.relative_to(folder.resolve()).as_posix()
            files[target] = _read_folder_file(file, relative, limits.zip)
            check_file_totals(len(files), sum(map(len, files.values())), limits.zip)

    text = rewrite_local(text, folder, carry)
    for theme in markdown_theme_files(text):
        if theme not in files and (folder / theme).is_file():
            files[theme] = _read_folder_file(folder / theme, theme, limits.zip)
    imports = folder_import_reader(
        folder, limits.zip.max_file_bytes, lambda found: rewrite_local(found, folder, carry)
    )
    deck = deck_from_markdown(text, name, files, limits, sourced=sourced, read_import=imports)
    return deck.model_copy(update={"other_files": _other_files(folder, limits.zip)})


def _reveal_entry(folder: Path) -> str | None:
    """The HTML file of the reveal.js deck in `folder` (`reveal_entry`), or None."""

    def read(name: str) -> str:
        path = folder / name
        if path.is_symlink() or path.stat().st_size > 1_000_000:
            return ""
        return path.read_text(encoding="utf-8", errors="replace")

    names = [p.name for p in folder.iterdir() if p.is_file()]
    return reveal_entry(names, read, str(folder))


def _read_tree(folder: Path, limits: ZipLimits) -> dict[str, bytes]:
    """Every file under `folder` but `node_modules/` and dot files, keyed by relative path."""
    files: dict[str, bytes] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "node_modules")
        for name in dirnames:
            if (here / name).is_symlink():
                rel = (here / name).relative_to(folder).as_posix()
                raise DeckSourceError(Code.SYMLINK, f"{rel} is a symbolic link", file=rel)
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            rel = (here / name).relative_to(folder).as_posix()
            files[rel] = _read_folder_file(here / name, rel, limits)
            total += len(files[rel])
            check_file_totals(len(files), total, limits)
    return files


def load_reveal_folder(folder: Path, limits: DeckLimits, entry: str = INDEX_FILE) -> DeckSource:
    """Load the reveal.js HTML deck in `folder` (its `entry` HTML and the files beside it).

    An `entry` in a subfolder (`examples/markdown.html`) is read as if it stood in `folder`:
    its HTML references are rewritten from its own folder (`../dist/reveal.js` ->
    `dist/reveal.js`), as the browser resolves them, and the files beside it are also found
    without the subfolder (what its Markdown refers to: `image.png`, not `examples/...`)."""
    files = _read_tree(folder, limits.zip)
    text = decode_text(files[entry], entry)
    if "/" in entry:
        here = posixpath.dirname(entry) + "/"
        text = rebase_references(text, here.rstrip("/"))
        beside = {p.removeprefix(here): data for p, data in files.items() if p.startswith(here)}
        name = posixpath.basename(entry)
        if name in files:
            name = entry.replace("/", "-")
        files = {**beside, **files, name: text.encode("utf-8")}
        entry = name
    return deck_from_reveal_html(text, files, limits, filename=entry)


def _reveal_root(entry: Path) -> Path:
    """The folder a reveal.js HTML file's deck is read from: its own, or, for a file in a
    subfolder of reveal.js's repository (`examples/markdown.html`, which loads `../dist/`),
    the nearest of its two parents holding `dist/reveal.js`."""
    here = entry.parent
    if (here / "dist" / "reveal.js").is_file():
        return here
    for parent in (here.parent, here.parent.parent):
        if (parent / "dist" / "reveal.js").is_file() and not parent.is_symlink():
            return parent
    return here


def load_deck_folder(folder: Path, limits: DeckLimits) -> DeckSource:
    """Load the deck in `folder`; only `deck.toml`, the theme, `pages/` and `assets/` are read.

    `folder` may instead be a one-file Markdown deck (`talk.md`), read with the `assets/`
    folder beside it, or a reveal.js HTML deck (a folder with its `index.html`, no
    `deck.toml`). Symbolic links anywhere in those are refused, as in a ZIP.
    """
    if folder.is_file() and is_markdown_file(folder.name):
        return load_markdown_file(folder, limits)
    if folder.is_file() and folder.suffix.lower() in (".html", ".htm"):
        text = folder.read_text(encoding="utf-8", errors="replace")
        if is_reveal_html(text) and not folder.is_symlink():
            root = _reveal_root(folder)
            return load_reveal_folder(root, limits, entry=folder.relative_to(root).as_posix())
    if folder.is_file():
        raise DeckSourceError(
            Code.FOLDER_NOT_FOUND,
            f"{folder} is a file; give a deck folder (deck.toml, pages/), a Markdown file (.md) "
            "or a reveal.js deck's HTML file",
        )
    if not folder.is_dir():
        raise DeckSourceError(Code.FOLDER_NOT_FOUND, f"{folder} is not a folder")
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.is_file():
        markdown = sorted(p for p in folder.iterdir() if p.is_file() and is_markdown_file(p.name))
        entry = _reveal_entry(folder)
        if entry is not None:
            return load_reveal_folder(folder, limits, entry)
        hint = f"; to render the Markdown deck, give the file: {markdown[0]}" if markdown else ""
        raise missing_manifest(f"in {folder}{hint}")
    data = _read_folder_file(manifest_path, MANIFEST_FILE, limits.zip)
    files = _read_tops(folder, (PAGES_DIR, ASSETS_DIR), limits.zip)
    manifest = checked_manifest(data, files, limits)
    if manifest.theme is not None:
        theme = safe_relative(manifest.theme, file=MANIFEST_FILE, field="theme")
        if not (folder / theme).resolve().is_relative_to(folder.resolve()):
            raise DeckSourceError(
                Code.SYMLINK, f"{theme} leads outside the deck folder", file=theme, field="theme"
            )
        if (folder / theme).is_file() and theme not in files:
            files[theme] = _read_folder_file(folder / theme, theme, limits.zip)
    deck = assemble_deck(manifest, files, limits)
    return deck.model_copy(update={"other_files": _other_files(folder, limits.zip)})
