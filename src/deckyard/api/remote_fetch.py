"""Downloads a deck's remote files through the SSRF guard of URL renders.

Every URL, and every redirect it leads to, must pass `UrlGuard` (public addresses only, unless
the host is in `renderer_url_allow_hosts`); a file is at most `deck_max_file_bytes` and takes at
most `deck_fetch_remote_timeout_seconds`. The server fetches when the workspace's `fetch_remote`
setting is on, or unset and the server's `deck_fetch_remote` is on (`workspace_settings`);
`deckyard render` and `deckyard import --fetch-remote` use the same download.
"""

from __future__ import annotations

from urllib.parse import urljoin

import httpx

from deckyard.config import Settings
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.importer import FetchRefused
from deckyard.decks.source.remote import AsyncFetch, fetch_remote_assets
from deckyard.render.renderer.ssrf import UrlGuard, pinned_request

MAX_REDIRECTS = 5


async def _body(response: httpx.Response, limit: int) -> bytes:
    if response.status_code != 200:
        raise FetchRefused(f"HTTP {response.status_code}")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise FetchRefused(f"larger than {limit} bytes")
    return bytes(body)


async def guarded_download(url: str, guard: UrlGuard, settings: Settings) -> bytes:
    """The body of `url` after every hop passed `guard`; raises `FetchRefused` with why not.

    Each hop connects to an address the guard checked (`pinned_request`)."""
    target = url if "://" in url else "https:" + url
    limit = settings.deck_max_file_bytes
    async with httpx.AsyncClient(timeout=settings.deck_fetch_remote_timeout_seconds) as client:
        for _ in range(MAX_REDIRECTS + 1):
            verdict = await guard.check_url(target)
            if not verdict.allowed:
                raise FetchRefused(f"refused by the SSRF guard ({verdict.reason})")
            try:
                request = pinned_request(client, target, verdict.addresses[0])
                response = await client.send(request, stream=True)
                try:
                    if not (response.is_redirect and "location" in response.headers):
                        return await _body(response, limit)
                    target = urljoin(target, response.headers["location"])
                finally:
                    await response.aclose()
            except httpx.HTTPError as exc:
                raise FetchRefused(f"download failed ({exc!r})") from None
    raise FetchRefused(f"more than {MAX_REDIRECTS} redirects")


def guarded_fetch(settings: Settings) -> AsyncFetch:
    """An async fetcher that only reaches what the SSRF guard allows."""
    guard = UrlGuard(settings.renderer_url_allow_hosts, settings.renderer_dns_timeout_seconds)

    async def fetch(url: str) -> bytes:
        return await guarded_download(url, guard, settings)

    return fetch


async def with_remote_files(source: DeckSource, settings: Settings, *, fetch: bool) -> DeckSource:
    """`source` with its remote files fetched when `fetch` (the workspace's effective
    `fetch_remote`, `fetch_remote_for`), else as it is."""
    if not fetch:
        return source
    return await fetch_remote_assets(
        source, guarded_fetch(settings), max_files=settings.deck_fetch_remote_max_files
    )
