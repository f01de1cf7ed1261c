"""`deckyard import --fetch-remote`: downloads through the same SSRF guard as URL renders.

Every URL, and every redirect it leads to, must pass `UrlGuard` (public addresses only, unless
the host is in `renderer_url_allow_hosts`); sizes are capped by `deck_max_file_bytes`.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urljoin

import httpx

from deckyard.config import Settings
from deckyard.decks.source.importer import Fetch, FetchRefused
from deckyard.render.renderer.ssrf import UrlGuard

_MAX_REDIRECTS = 5


async def _download(url: str, guard: UrlGuard, settings: Settings) -> bytes:
    target = url if "://" in url else "https:" + url
    async with httpx.AsyncClient(timeout=settings.renderer_dns_timeout_seconds * 2) as client:
        for _ in range(_MAX_REDIRECTS + 1):
            verdict = await guard.check_url(target)
            if not verdict.allowed:
                raise FetchRefused(f"refused by the SSRF guard ({verdict.reason})")
            try:
                response = await client.get(target, follow_redirects=False)
            except httpx.HTTPError as exc:
                raise FetchRefused(f"download failed ({exc})") from None
            if response.is_redirect and "location" in response.headers:
                target = urljoin(target, response.headers["location"])
                continue
            if response.status_code != 200:
                raise FetchRefused(f"HTTP {response.status_code}")
            if len(response.content) > settings.deck_max_file_bytes:
                raise FetchRefused(f"larger than {settings.deck_max_file_bytes} bytes")
            return response.content
    raise FetchRefused(f"more than {_MAX_REDIRECTS} redirects")


def guarded_fetcher(settings: Settings) -> Fetch:
    """A fetcher for `import_markdown_deck` that only reaches what the SSRF guard allows."""
    guard = UrlGuard(settings.renderer_url_allow_hosts, settings.renderer_dns_timeout_seconds)

    def fetch(url: str) -> bytes:
        return asyncio.run(_download(url, guard, settings))

    return fetch
