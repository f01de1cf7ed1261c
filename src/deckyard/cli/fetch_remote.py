"""Remote files for the CLI: `deckyard import --fetch-remote`, and `deckyard render`'s fetch.

Both download through `api.remote_fetch.guarded_download` (the SSRF guard of URL renders, with
its size and time limits). `deckyard render` keeps what it downloaded in a content-addressed
cache under the user's cache folder (`remote/blobs/<sha256>`, and `remote/urls/<sha256 of the
URL>` naming a blob), reused for `deck_fetch_remote_cache_seconds`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

from deckyard.api.remote_fetch import guarded_download, guarded_fetch
from deckyard.config import Settings
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.importer import Fetch
from deckyard.decks.source.remote import AsyncFetch, fetch_remote_assets
from deckyard.render.renderer.ssrf import UrlGuard


def guarded_fetcher(settings: Settings) -> Fetch:
    """A fetcher for `import_markdown_deck` that only reaches what the SSRF guard allows."""
    guard = UrlGuard(settings.renderer_url_allow_hosts, settings.renderer_dns_timeout_seconds)

    def fetch(url: str) -> bytes:
        return asyncio.run(guarded_download(url, guard, settings))

    return fetch


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cached(cache: Path, url: str, max_age: float) -> bytes | None:
    pointer = cache / "urls" / _sha(url.encode("utf-8"))
    try:
        if time.time() - pointer.stat().st_mtime > max_age:
            return None
        data = (cache / "blobs" / pointer.read_text(encoding="ascii").strip()).read_bytes()
    except (OSError, ValueError):
        return None
    return data


def _keep(cache: Path, url: str, data: bytes) -> None:
    digest = _sha(data)
    for sub in ("blobs", "urls"):
        (cache / sub).mkdir(parents=True, exist_ok=True)
    blob = cache / "blobs" / digest
    if not blob.exists():
        partial = blob.with_name(f"{digest}.{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(blob)
    (cache / "urls" / _sha(url.encode("utf-8"))).write_text(digest, encoding="ascii")


def cached_fetch(settings: Settings, cache: Path) -> AsyncFetch:
    """The guarded fetcher, through the content-addressed cache in `cache`."""
    download = guarded_fetch(settings)
    max_age = settings.deck_fetch_remote_cache_seconds

    async def fetch(url: str) -> bytes:
        kept = await asyncio.to_thread(_cached, cache, url, max_age)
        if kept is not None:
            return kept
        data = await download(url)
        await asyncio.to_thread(_keep, cache, url, data)
        return data

    return fetch


async def fetch_for_render(source: DeckSource, settings: Settings, cache: Path) -> DeckSource:
    """`source` with the remote files it loads fetched (failures become warnings)."""
    return await fetch_remote_assets(
        source,
        cached_fetch(settings, cache / "remote"),
        max_files=settings.deck_fetch_remote_max_files,
    )
