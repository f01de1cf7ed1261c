"""Resolves a page's references to the deck's assets and inlines them as `data:` URIs.

A reference is a path relative to the deck folder (`assets/img/logo.png`), or, inside a
stylesheet file, relative to that file, as a browser would read it. A reference that leaves the
deck (`../`), is absolute (`/x`, `C:\\x`), names a scheme other than `data:` (`http:`, `file:`,
`//host`) or names no asset is refused with a `ReferenceProblem`; the caller adds page and line.
An `http(s):` or `//host` reference whose file was fetched (`source/remote.py`) resolves to
that asset.
Same-document fragments (`#id`) and query-only links (`?page=2`) are left alone: they load
nothing. `outside` names deck files found outside `assets/`, so the message can say where.
"""

from __future__ import annotations

import base64
import posixpath
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote

from deckyard.decks.errors import CompileErrorCode
from deckyard.decks.source.deck_source import Asset
from deckyard.decks.source.references import REMOTE
from deckyard.decks.source.remote import REMOTE_DIR, remote_asset_stem

if TYPE_CHECKING:
    from deckyard.decks.compile.css_scope import CssProblem

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DRIVE = re.compile(r"^[A-Za-z]:[/\\]")
_ASCII_WHITESPACE = " \t\n\f\r"


class ReferenceProblem(Exception):
    """A reference that cannot be resolved: why, as a code and a message."""

    def __init__(self, code: CompileErrorCode, message: str, reference: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reference = reference


def data_uri(asset: Asset) -> str:
    """`asset` as a base64 `data:` URI."""
    encoded = base64.b64encode(asset.data).decode("ascii")
    return f"data:{asset.media_type};base64,{encoded}"


class AssetResolver:
    """Turns references into `data:` URIs from one deck's assets, caching each encoding."""

    def __init__(self, assets: Mapping[str, Asset], outside: frozenset[str] = frozenset()) -> None:
        self._assets = assets
        self._outside = outside
        self._remote = {
            posixpath.splitext(path)[0]: path for path in assets if path.startswith(REMOTE_DIR)
        }
        """Assets fetched for remote references, by `remote_asset_stem`."""
        self._uris: dict[str, str] = {}
        self.used: set[str] = set()
        self.sheets: dict[tuple[str, str], tuple[str, list[CssProblem]]] = {}
        """Unscoped linked stylesheets already rewritten, by (file, base folder), with their
        problems: every page of a reveal.js deck links the same theme."""

    def asset_path(self, reference: str, base_dir: str = "") -> str | None:
        """The deck path `reference` names, None for a fragment or `data:` URI, else raise."""
        ref = reference.strip(_ASCII_WHITESPACE)
        if not ref:
            raise ReferenceProblem(CompileErrorCode.INVALID_REFERENCE, "empty reference", reference)
        if ref.startswith("#") or ref[:5].lower() == "data:":
            return None
        if "\\" in ref:
            raise ReferenceProblem(
                CompileErrorCode.INVALID_REFERENCE,
                f"{ref!r} uses backslashes; use '/' in paths",
                reference,
            )
        if _DRIVE.match(ref) or (ref.startswith("/") and not ref.startswith("//")):
            raise ReferenceProblem(
                CompileErrorCode.ABSOLUTE_PATH,
                f"{ref!r} is absolute; write a path relative to the deck folder",
                reference,
            )
        if ref.startswith("//") or _SCHEME.match(ref):
            fetched = self._remote.get(remote_asset_stem(ref))
            if fetched is not None and REMOTE.match(ref):
                return fetched
            raise ReferenceProblem(
                CompileErrorCode.EXTERNAL_REFERENCE,
                f"{ref!r} is outside the deck and was not fetched (`deckyard render --offline`, "
                "or the workspace's fetch_remote setting or the server's deck_fetch_remote is "
                "off); render without --offline to fetch it, or run `deckyard import "
                "--fetch-remote` (or download it into assets/) and refer to it as assets/<file>",
                reference,
            )
        path = unquote(ref.split("#", 1)[0].split("?", 1)[0])
        if not path:
            return None
        joined = posixpath.normpath(posixpath.join(base_dir, path))
        if joined == ".." or joined.startswith("../"):
            raise ReferenceProblem(
                CompileErrorCode.ESCAPING_PATH,
                f"{ref!r} escapes the deck folder; paths are relative to the deck folder, "
                "as in assets/logo.png",
                reference,
            )
        if joined not in self._assets:
            message = f"{ref!r}: no such asset ({joined}){self._hint(joined)}"
            raise ReferenceProblem(CompileErrorCode.MISSING_ASSET, message, reference)
        return joined

    def _hint(self, path: str) -> str:
        if path in self._outside:
            return f"; move it into assets/ (found at {path})"
        if not path.startswith("assets/"):
            return f"; deck files live in assets/: put it there and write assets/{path}"
        return ""

    def asset(self, path: str) -> Asset:
        """The asset at deck path `path`, which `asset_path` returned."""
        self.used.add(path)
        return self._assets[path]

    def resolve(self, reference: str, base_dir: str = "") -> str:
        """`reference` inlined: a `data:` URI (with its fragment kept), or unchanged."""
        path = self.asset_path(reference, base_dir)
        if path is None:
            return reference
        self.used.add(path)
        uri = self._uris.get(path)
        if uri is None:
            uri = data_uri(self._assets[path])
            self._uris[path] = uri
        fragment = reference.strip(_ASCII_WHITESPACE).partition("#")[2]
        return f"{uri}#{fragment}" if fragment else uri


def is_hyperlink(reference: str) -> bool:
    """Whether `reference` is a link to follow (http, https, mailto), never loaded by a render."""
    return (
        reference.strip(_ASCII_WHITESPACE)[:7].lower().startswith(("http://", "https:/", "mailto:"))
    )


def split_srcset(value: str) -> list[tuple[str, str]]:
    """The candidates of a `srcset` as `(url, descriptors)` pairs, per the HTML spec's parser."""
    out: list[tuple[str, str]] = []
    pos, end = 0, len(value)
    while pos < end:
        while pos < end and (value[pos] in _ASCII_WHITESPACE or value[pos] == ","):
            pos += 1
        if pos >= end:
            break
        start = pos
        while pos < end and value[pos] not in _ASCII_WHITESPACE:
            pos += 1
        url = value[start:pos]
        if url.endswith(","):
            out.append((url.rstrip(","), ""))
            continue
        start, depth = pos, 0
        while pos < end and (value[pos] != "," or depth > 0):
            depth += {"(": 1, ")": -1}.get(value[pos], 0)
            pos += 1
        out.append((url, value[start:pos].strip(_ASCII_WHITESPACE)))
    return out


def resolve_srcset(value: str, resolver: AssetResolver) -> str:
    """`value` with every candidate URL inlined; raises on the first bad candidate."""
    parts = []
    for url, descriptors in split_srcset(value):
        resolved = resolver.resolve(url)
        parts.append(f"{resolved} {descriptors}".rstrip())
    return ", ".join(parts)
