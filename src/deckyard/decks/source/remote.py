"""Remote files a deck loads (images, fonts, stylesheets by URL), fetched into its assets.

The renderer never touches the network, so a remote reference is downloaded before the deck
is compiled (`deckyard render`, or the server when the workspace's `fetch_remote` is on) by a
fetcher the caller passes: the CLI's and the server's go through the SSRF guard of URL renders.
Each URL becomes the asset `assets/remote/<host>/<key><ext>`, `<key>` a hash of the URL, so the
compiler finds it from the URL alone (`remote_asset_stem`) and a stored deck compiles again
without the network. A fetch that fails is a `SourceWarning` and the asset is a transparent
image, so the slide renders with that picture missing, as Marp shows it; without a fetcher
nothing is fetched and the compiler refuses the reference.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import posixpath
import re
from collections.abc import Awaitable, Callable
from urllib.parse import urljoin, urlsplit

from deckyard.decks.css_urls import rewrite_stylesheet_urls
from deckyard.decks.source.deck_source import MEDIA_TYPES, Asset, DeckSource, SourceWarning
from deckyard.decks.source.references import REMOTE, remote_loads

REMOTE_DIR = "assets/remote/"
AsyncFetch = Callable[[str], Awaitable[bytes]]
"""Downloads one URL (through the SSRF guard, within the size and time limits) or raises."""

MISSING_IMAGE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNgYGBgAAAABQABeqhXUAAAAABJRU5ErkJggg=="
)
"""A 1x1 transparent PNG: what a remote image that could not be fetched shows."""

CSS_DEPTH = 2
"""How deep a fetched stylesheet's own remote files are followed (a font CSS, then its fonts)."""

_SAFE = re.compile(r"[^A-Za-z0-9.-]+")
_SNIFF: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG", ".png"),
    (b"\xff\xd8\xff", ".jpg"),
    (b"GIF8", ".gif"),
    (b"wOF2", ".woff2"),
    (b"wOFF", ".woff"),
    (b"OTTO", ".otf"),
    (b"\x00\x01\x00\x00", ".ttf"),
)


def absolute_url(ref: str) -> str:
    """`ref` with a scheme (`//host/x` is fetched over https)."""
    return ref if "://" in ref else "https:" + ref


def remote_asset_stem(ref: str) -> str:
    """The deck path, without extension, of the asset fetched for the remote reference `ref`."""
    url = absolute_url(ref.strip())
    host = _SAFE.sub("-", urlsplit(url).hostname or "host")
    return f"{REMOTE_DIR}{host}/{hashlib.sha256(url.encode('utf-8')).hexdigest()[:20]}"


def _extension(url: str, data: bytes) -> str:
    named = posixpath.splitext(urlsplit(url).path)[1].lower()
    if named in MEDIA_TYPES:
        return named
    head = data[:512].lstrip()
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    for magic, ext in _SNIFF:
        if data.startswith(magic):
            return ext
    if head.startswith(b"<svg") or (head.startswith(b"<?xml") and b"<svg" in data[:2048]):
        return ".svg"
    return ".css" if b"{" in head else ""


def _remote_refs(source: DeckSource) -> list[tuple[str, str]]:
    """(URL, where it is) for every remote file the deck loads, once per URL."""
    found: dict[str, str] = {}
    for ref in remote_loads(source.theme_css):
        found.setdefault(ref, source.theme_path or "theme")
    for page in source.pages:
        for ref in remote_loads(page.text):
            found.setdefault(ref, page.name)
    return list(found.items())


def absolute_css(css: bytes, url: str) -> bytes:
    """A fetched stylesheet with its relative `url()`s made absolute against `url`, so the
    files it loads (a web font's `.woff2`) are fetched and found like any remote reference."""
    try:
        text = css.decode("utf-8")
    except UnicodeDecodeError:
        return css

    def absolute(ref: str, _node: object) -> str | None:
        ref = ref.strip()
        if not ref or ref.startswith(("#", "data:")) or REMOTE.match(ref):
            return None
        return urljoin(url, ref)

    return rewrite_stylesheet_urls(text, absolute).encode("utf-8")


async def fetch_remote_assets(
    source: DeckSource, fetch: AsyncFetch, *, max_files: int, concurrency: int = 8
) -> DeckSource:
    """`source` with every remote file it loads added as an asset (see the module docstring).

    A fetched stylesheet's own remote files are fetched too, up to `CSS_DEPTH` levels deep.
    At most `max_files` URLs are fetched in all; the others, and every failed fetch, are
    warnings and show as missing images. URLs fetched already (an asset under their stem)
    are kept.
    """
    have = {posixpath.splitext(p)[0] for p in source.assets if p.startswith(REMOTE_DIR)}
    # a scan of every page's text: ~50 ms a megabyte, kept off the caller's event loop
    refs = await asyncio.to_thread(_remote_refs, source)
    wanted = [(ref, where) for ref, where in refs if remote_asset_stem(ref) not in have]
    if not wanted:
        return source
    gate = asyncio.Semaphore(concurrency)

    async def one(ref: str) -> bytes | str:
        async with gate:
            try:
                return await fetch(absolute_url(ref))
            except Exception as exc:  # every failure is the same warning: say why, go on
                return str(exc) or type(exc).__name__

    assets = dict(source.assets)
    warnings = list(source.warnings)
    budget = max_files
    for _ in range(CSS_DEPTH + 1):
        fetched = await asyncio.gather(*(one(ref) for ref, _ in wanted[:budget]))
        nested: dict[str, str] = {}
        for index, (ref, where) in enumerate(wanted):
            outcome = fetched[index] if index < budget else f"more than {max_files} remote files"
            stem = remote_asset_stem(ref)
            have.add(stem)
            url = absolute_url(ref)
            if isinstance(outcome, bytes):
                path = stem + _extension(url, outcome)
                data = outcome
                if path.endswith(".css"):
                    data = absolute_css(outcome, url)
                    for inner in remote_loads(data.decode("utf-8", "replace")):
                        if remote_asset_stem(inner) not in have:
                            nested.setdefault(inner, where)
            else:
                path, data = stem + ".png", MISSING_IMAGE
                message = f"{ref} was not fetched ({outcome}); the slide shows it missing"
                warnings.append(SourceWarning(file=where, message=message))
            media = MEDIA_TYPES.get(posixpath.splitext(path)[1], "application/octet-stream")
            assets[path] = Asset(path=path, data=data, media_type=media)
        budget = max(0, budget - len(fetched))
        wanted = list(nested.items())
        if not wanted:
            break
    return source.model_copy(update={"assets": assets, "warnings": warnings})
