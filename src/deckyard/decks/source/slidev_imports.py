"""Slidev's slide imports (`src: ./pages/toc.md#2,5-7`): where the file is, which slides to take.

Slidev reads `src` relative to the importing file (`/pages/x.md` from the deck's folder), takes
the slides the part after `#` names (all without one), and lays the importing slide's other
front matter over each imported slide's own. `markdown_deck.py` does the splicing; this module
resolves the path, reads the range and, for a deck on disk, reads the file (never outside the
deck's folder, never through a symbolic link).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path

from deckyard.decks.source.assemble import decode_text

ImportReader = Callable[[str], str | None]
"""Reads a Markdown file a deck imports, by deck path (`pages/x.md`); None when it is absent."""


def import_target(src: str, importer: str | None) -> tuple[str, str]:
    """(deck path, slide range) of `src` in the file `importer` (None: the deck's own file).

    Raises `ValueError` for a path that leads outside the deck's folder.
    """
    raw, _, spec = src.strip().partition("#")
    if raw.startswith("/"):
        path = posixpath.normpath(raw.lstrip("/"))
    else:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(importer or ""), raw))
    if path == ".." or path.startswith("../") or posixpath.isabs(path) or path == ".":
        raise ValueError(f"{raw} leads outside the deck's folder")
    return path, spec.strip()


def slide_numbers(spec: str, count: int) -> list[int]:
    """The slides (from 1) that the range `spec` (`2,5-7`, `all`, empty) names, as Slidev reads it.

    Numbers past `count` are dropped, the rest sorted and each taken once.
    """
    if spec in ("", "all", "*"):
        return list(range(1, count + 1))
    if spec == "none":
        return []
    found: set[int] = set()
    for part in spec.replace(";", ",").split(","):
        start, dash, end = part.strip().partition("-")
        if not start.isdigit() or (end and not end.isdigit()):
            continue
        last = (int(end) if end else count) if dash else int(start)
        found.update(range(int(start), last + 1))
    return sorted(n for n in found if 1 <= n <= count)


def folder_import_reader(
    folder: Path, max_bytes: int, transform: Callable[[str], str] | None = None
) -> ImportReader:
    """An `ImportReader` for a deck in `folder`; `transform` is applied to each file read.

    A file outside `folder`, behind a symbolic link, not a regular file or larger than
    `max_bytes` reads as absent, so the import is reported as missing.
    """
    base = folder.resolve()

    def read(path: str) -> str | None:
        candidate = folder / path
        resolved = candidate.resolve()
        if (
            not resolved.is_relative_to(base)
            or candidate.is_symlink()
            or not resolved.is_file()
            or resolved.stat().st_size > max_bytes
        ):
            return None
        text = decode_text(resolved.read_bytes(), path)
        return transform(text) if transform is not None else text

    return read
