"""Document tabs: a browser context with one page parked on an empty document, reused with a reset.

Document renders get no network, so what one render can leave behind lives in a few known
places: the synthetic origin's storage (`DOCUMENT_URL`), cookies, the HTTP cache, permission
overrides, the tab's session storage, `window.name`, history and popups. A render writes its
HTML into the parked empty document (`set_content`, no navigation on the critical path). After
a successful render, `reset()` navigates to a fresh empty document (a new `Document` and
`Window`), clears all of the above, and then checks with a probe in the page that the tab looks
exactly as it did when it was opened; only then is the tab reused. Every request except the
document navigation itself is aborted and reported, and the context's egress proxy refuses
everything as a second wall.

Leak: renders that share a tab share a Chromium renderer process. A page that exploited a
renderer bug could observe later renders in the same tab, at most `renderer_tab_reuse_limit`
of them; set it to 1 for a never-used context (and process) per render.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
from typing import Any
from urllib.parse import unquote, urlsplit

from playwright.async_api import (
    BrowserContext,
    CDPSession,
    ConsoleMessage,
    Page,
    Request,
    Route,
    WebSocketRoute,
)
from playwright.async_api import Error as PlaywrightError

from deckyard.config import Settings
from deckyard.render.protocol import RenderInput
from deckyard.render.renderer.browser.diagnostics import DiagnosticsCollector
from deckyard.render.renderer.browser.inline_files import DOCUMENT_URL, extract_inline_files
from deckyard.render.renderer.browser.pool import NO_PEER_NETWORK_SCRIPT, BrowserHandle
from deckyard.render.renderer.proxy import EgressProxy

DOCUMENT_HOST = "document.deckyard.invalid"
DOCUMENT_ORIGIN = "http://document.deckyard.invalid"
NO_NETWORK = "network access is disabled for document renders"
NO_NAVIGATION = "a document render may not navigate its page away"

# Clears what only the page itself can clear, then reports what a render could have left behind.
CLEAN_PROBE = """async (names) => {
  window.name = '';
  sessionStorage.clear();
  const permissions = {};
  for (const name of names) {
    try {
      permissions[name] = (await navigator.permissions.query({name})).state;
    } catch (e) {
      permissions[name] = 'unsupported';
    }
  }
  return {
    url: location.href,
    localStorage: localStorage.length,
    sessionStorage: sessionStorage.length,
    databases: (await indexedDB.databases()).map((db) => db.name),
    cookie: document.cookie,
    name: window.name,
    history: history.length,
    permissions,
  };
}"""
PROBED_PERMISSIONS = ["geolocation", "notifications", "camera", "microphone", "midi"]


class CleanupTimeoutError(Exception):
    """Closing a browser context took longer than allowed."""


async def close_context(context: BrowserContext, timeout: float) -> None:
    """Close a context; raise `CleanupTimeoutError` if it does not close within `timeout`."""
    task = asyncio.ensure_future(context.close())
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout)
    except TimeoutError:
        task.cancel()
        raise CleanupTimeoutError(f"context did not close within {timeout}s") from None
    except PlaywrightError:
        return


class DocumentTab:
    """One context and page for document renders; `open`, then `bind`/`load`/`unbind`, `reset`."""

    def __init__(self, handle: BrowserHandle, scale: float, settings: Settings) -> None:
        self.handle = handle
        self.scale = scale
        self.uses = 0
        self._settings = settings
        self._collector: DiagnosticsCollector | None = None
        self._document = ""
        self._files: dict[str, bytes] = {}
        self._inline: dict[str, tuple[bytes, str]] = {}
        self._proxy = EgressProxy(None, self._on_blocked, quiet_hosts=frozenset({DOCUMENT_HOST}))
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._cdp: CDPSession | None = None
        self._viewport: tuple[int, int] | None = None
        self._media: str | None = None
        self._baseline: dict[str, Any] = {}

    @property
    def page(self) -> Page:
        """The tab's only page."""
        assert self._page is not None, "tab is not open"
        return self._page

    @property
    def cdp(self) -> CDPSession:
        """A CDP session attached to the page for the tab's whole life."""
        assert self._cdp is not None, "tab is not open"
        return self._cdp

    async def open(self, width: int, height: int) -> None:
        """Create the context behind its own refusing proxy and park the page; record a baseline."""
        proxy_url = await self._proxy.start()
        self._context = context = await self.handle.browser.new_context(
            viewport={"width": width, "height": height},
            device_scale_factor=self.scale,
            proxy={"server": proxy_url, "bypass": "<-loopback>"},
            service_workers="block",
            accept_downloads=False,
        )
        await context.add_init_script(NO_PEER_NETWORK_SCRIPT)
        await context.route("**/*", self._route)
        await context.route_web_socket("**/*", self._refuse_socket)
        self._page = page = await context.new_page()
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)
        page.on("requestfailed", self._on_request_failed)
        self._viewport = (width, height)
        self._cdp = await context.new_cdp_session(self._page)
        await self._page.goto(DOCUMENT_URL, wait_until="load")
        await self._clear(context, self._cdp)
        self._baseline = await self._probe()

    def bind(self, collector: DiagnosticsCollector) -> None:
        """Start a render: blocked requests and page events go to `collector`."""
        self.uses += 1
        self._collector = collector

    def unbind(self) -> None:
        """End a render: stop reporting to its collector and forget its document and files."""
        self._collector = None
        self._document = ""
        self._files = {}
        self._inline = {}

    async def prepare(self, render: RenderInput) -> None:
        """Apply the render's viewport and media, skipping what the tab already has."""
        page = self.page
        if self._viewport != (render.width, render.height):
            self._viewport = None
            await page.set_viewport_size({"width": render.width, "height": render.height})
            self._viewport = (render.width, render.height)
        if self._media != render.media:
            self._media = None
            await page.emulate_media(media=render.media)
            self._media = render.media

    async def load(self, render: RenderInput) -> None:
        """Write the render's document into the parked page and wait as asked.

        Large `data:` fonts and images are served from the document's origin during this
        render instead of being parsed out of the HTML (`inline_files.py`).
        """
        extracted = extract_inline_files(
            render.document or "", self._settings.renderer_inline_extract_min_bytes
        )
        self._document = extracted.document
        self._inline = extracted.files
        if self._collector is not None:
            self._collector.aliases.update(extracted.shown_as)
        self._files = {
            path: base64.b64decode(data, validate=True)
            for path, data in (render.files or {}).items()
        }
        await self.page.set_content(self._document, wait_until=render.wait.until, timeout=0)

    async def _route(self, route: Route) -> None:
        request = route.request
        try:
            bundled = self._bundled(request.url)
            navigation = request.is_navigation_request()
            if request.url == DOCUMENT_URL and navigation:
                await route.fulfill(body=self._document, content_type="text/html; charset=utf-8")
            elif navigation and request.frame.parent_frame is None:
                if self._collector is not None:
                    self._collector.block_navigation(request.url, NO_NAVIGATION)
                await route.abort("blockedbyclient")
            elif bundled is not None:
                body, content_type = bundled
                await route.fulfill(body=body, content_type=content_type)
            else:
                self._on_blocked(request.url, NO_NETWORK)
                await route.abort("blockedbyclient")
        except PlaywrightError:
            return

    def _bundled(self, url: str) -> tuple[bytes, str] | None:
        """The bundle or extracted file a same-origin URL names, with its content type."""
        if not (self._files or self._inline) or not url.startswith(DOCUMENT_URL):
            return None
        path = unquote(urlsplit(url).path.lstrip("/"))
        inline = self._inline.get(path)
        if inline is not None:
            return inline
        body = self._files.get(path)
        if body is None:
            return None
        guessed = mimetypes.guess_type(path)[0] or "application/octet-stream"
        if guessed.startswith("text/") or guessed in ("application/javascript", "image/svg+xml"):
            guessed += "; charset=utf-8"
        return body, guessed

    async def _refuse_socket(self, socket: WebSocketRoute) -> None:
        self._on_blocked(socket.url, NO_NETWORK)
        try:
            await socket.close()
        except PlaywrightError:
            return

    def _on_blocked(self, url: str, reason: str) -> None:
        if self._collector is not None:
            self._collector.add_blocked(url, reason)

    # The page keeps these listeners for life: subscribing per render costs driver round trips.
    def _on_console(self, message: ConsoleMessage) -> None:
        if self._collector is not None:
            self._collector.on_console(message)

    def _on_page_error(self, error: PlaywrightError) -> None:
        if self._collector is not None:
            self._collector.on_page_error(error)

    def _on_request_failed(self, request: Request) -> None:
        if self._collector is not None:
            self._collector.on_request_failed(request)

    async def _clear(self, context: BrowserContext, cdp: CDPSession) -> None:
        await asyncio.gather(
            context.clear_cookies(),
            context.clear_permissions(),
            cdp.send(
                "Storage.clearDataForOrigin", {"origin": DOCUMENT_ORIGIN, "storageTypes": "all"}
            ),
            cdp.send("Network.clearBrowserCache"),
            cdp.send("Page.resetNavigationHistory"),
            cdp.send("Emulation.setDefaultBackgroundColorOverride"),
        )

    async def _probe(self) -> dict[str, Any]:
        state: dict[str, Any] = await self.page.evaluate(CLEAN_PROBE, PROBED_PERMISSIONS)
        return state

    async def reset(self) -> dict[str, Any]:
        """Return the tab to the state it was opened in; report what differs from it (if any)."""
        assert self._context is not None
        context, page, cdp = self._context, self.page, self.cdp
        for extra in context.pages:
            if extra is not page:
                await extra.close()
        await page.goto(DOCUMENT_URL, wait_until="load")
        await self._clear(context, cdp)
        state, cookies = await asyncio.gather(self._probe(), context.cookies())
        left = {k: v for k, v in state.items() if self._baseline.get(k) != v}
        if cookies:
            left["cookies"] = len(cookies)
        if context.pages != [page]:
            left["pages"] = len(context.pages)
        return left

    async def close(self) -> None:
        """Close the context and the proxy; raise `CleanupTimeoutError` if the context hangs."""
        context, self._context = self._context, None
        try:
            if context is not None:
                await close_context(context, self._settings.renderer_cleanup_timeout_seconds)
        finally:
            await self._proxy.close()
