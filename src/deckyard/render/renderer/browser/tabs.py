"""Document tabs: browser contexts with no network, reused after a verified reset, kept warm.

Document renders get no network, so what one render can leave behind lives in a few known places:
the synthetic origin's storage (`DOCUMENT_URL`), cookies, the HTTP cache, permission overrides, the
tab's session storage, `window.name`, history and popups. A render writes its HTML into the parked
empty document (`set_content`, no navigation on the critical path). After a successful render,
`reset()` navigates to a fresh empty document (a new `Document` and `Window`), clears all of the
above, and then checks with a probe in the page that the tab looks exactly as it did when it was
opened; only then is the tab reused. Every request except the document navigation itself is aborted
and reported, and the context's egress proxy refuses everything as a second wall.

One tenant's inert renders skip the reset: a render that names its tenant, runs no script
(`runs_script`) and brings no files gives its tab back kept for that tenant (`TabPool.give_back`),
and that tenant's next render writes over it; `take` resets a kept tab before anyone else gets it.

Leak: renders that share a tab share a Chromium renderer process. A page that exploited a renderer
bug could observe later renders in the same tab, at most `renderer_tab_reuse_limit` of them; set it
to 1 for a never-used context (and process) per render.

**The pool.** The pool keeps `renderer_slots + renderer_spare_tabs` tabs alive on the current
browser. A document render takes a ready tab at its scale; after a successful render the tab resets
in the background (off the render's critical path, which is what the spare is for) and becomes ready
again if the reset verified clean. A tab that failed its reset, served `renderer_tab_reuse_limit`
renders, belongs to a retired or crashed browser, or was used by a render that failed, is closed and
replaced by a never-used one opened in the background. A render that finds no ready tab waits for
one, or opens its own when the pool has room.

**Inline files.** Large `data:` fonts and images of a document, served from the document's own
origin instead. Chromium parses a document with a base64-inlined font slowly: the example deck's
pages are ~775 KiB of HTML, almost all of it one display font, and `set_content` of such a page
costs ~6x that of the same page with the font fetched by URL. A document render therefore rewrites
each large (`renderer_inline_extract_min_bytes`) `data:` font in a CSS `url(...)` and each large
`data:` image in an `<img src>` into an absolute same-origin URL (`DOCUMENT_URL` +
`_deckyard/inline/<sha256>`, absolute so a `<base>` element cannot send it elsewhere); the tab
serves the decoded bytes at that URL during that render only, and nothing else changes: fonts are
awaited through `document.fonts.ready` and images hold the `load` event as before.

Only those two places are rewritten, where a URL and a `data:` URI mean the same to the page; CSS
backgrounds stay inline, since a background fetched late could miss the capture. Leak: a script that
reads such a `url(...)` or `src` back as text (to `atob` it, say) sees the URL.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import mimetypes
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
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
from deckyard.render.protocol import DEFAULT_HEIGHT, DEFAULT_WIDTH, RenderInput
from deckyard.render.renderer.browser.audit import install_axe
from deckyard.render.renderer.browser.pool import NO_PEER_NETWORK_SCRIPT, BrowserHandle, BrowserPool
from deckyard.render.renderer.proxy import EgressProxy

if TYPE_CHECKING:
    from deckyard.render.renderer.browser.capture import DiagnosticsCollector

log = logging.getLogger(__name__)

DOCUMENT_HOST = "document.deckyard.invalid"
DOCUMENT_ORIGIN = "http://document.deckyard.invalid"
DOCUMENT_URL = "http://document.deckyard.invalid/"
INLINE_PREFIX = "_deckyard/inline/"
"""Path under the document's origin where extracted files are served (bundle files never are:
the tab answers from this render's extracted files first, by exact key)."""


def _nocase(word: str) -> str:
    """`word` as a pattern matching it in any ASCII case (`url` -> `[uU][rR][lL]`).

    Not `re.IGNORECASE`: with it the pattern has no literal prefix to skip ahead to, and the
    scan tried the whole pattern at every offset of a ~775 KiB page (13 ms of a render's
    CPU, against 2 ms this way); it also let non-ASCII letters stand in (LONG S for "s", say).
    """
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


_MEDIA = r"([A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+)((?:;[A-Za-z0-9.+-]+=[A-Za-z0-9.+%-]+)*)"
_PAYLOAD = r"([A-Za-z0-9+/]+={0,2})"
_DATA_BASE64 = _nocase("data") + ":" + _MEDIA + ";" + _nocase("base64") + ","
_BASE64_MARK = re.compile(";" + _nocase("base64") + ",")
_FONT_URL = re.compile(
    "(" + _nocase("url") + r"\(\s*)([\"']?)" + _DATA_BASE64 + _PAYLOAD + r"\2(\s*\))"
)
_IMG_SRC = re.compile(
    "(<"
    + _nocase("img")
    + r"\b[^>]*?\s"
    + _nocase("src")
    + r"\s*=\s*)([\"'])"
    + _DATA_BASE64
    + _PAYLOAD
    + r"\2"
)
_FONT_TYPES = ("font/", "application/font-", "application/x-font-", "application/vnd.ms-fontobject")


_SCRIPTED = re.compile(
    r"<\s*(?:script|iframe|frame|object|embed)\b|\bon[a-z]+\s*=|javascript:"
    r"|http-equiv\s*=\s*[\"']?\s*refresh",
    re.IGNORECASE,
)


def runs_script(document: str) -> bool:
    """Whether a document may run script or navigate itself (a `<meta http-equiv=refresh>`);
    conservatively: a false yes only costs a reset. Asked of the document with its large
    `data:` files taken out (`DocumentTab.load`): scanning ~780 KiB of base64 took ~25 ms."""
    return _SCRIPTED.search(document) is not None


@dataclass
class Extracted:
    """A document with its large `data:` URIs replaced, and what to serve in their place."""

    document: str
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    """Path under the origin (`_deckyard/inline/<sha256>`) -> (bytes, content type)."""
    shown_as: dict[str, str] = field(default_factory=dict)
    """URL -> how diagnostics name it: the start of the original `data:` URI."""


def extract_inline_files(document: str, min_bytes: int) -> Extracted:
    """Rewrite large `data:` fonts in CSS `url()` and large `data:` `<img src>` (module doc)."""
    if _BASE64_MARK.search(document) is None:
        return Extracted(document)
    out = Extracted(document)
    by_payload: dict[str, str] = {}

    def replace(media: str, params: str, payload: str) -> str | None:
        if len(payload) < min_bytes:
            return None
        path = by_payload.get(payload)
        if path is None:
            try:
                data = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                return None
            path = INLINE_PREFIX + hashlib.sha256(data).hexdigest()
            by_payload[payload] = path
            out.files[path] = (data, media + params)
            out.shown_as[DOCUMENT_URL + path] = f"data:{media}{params};base64,{payload[:16]}…"
        return DOCUMENT_URL + path

    def font(match: re.Match[str]) -> str:
        opening, quote, media, params, payload, closing = match.groups()
        if not media.lower().startswith(_FONT_TYPES):
            return match.group(0)
        url = replace(media, params, payload)
        return match.group(0) if url is None else f"{opening}{quote}{url}{quote}{closing}"

    def image(match: re.Match[str]) -> str:
        opening, quote, media, params, payload = match.groups()
        if not media.lower().startswith("image/"):
            return match.group(0)
        url = replace(media, params, payload)
        return match.group(0) if url is None else f"{opening}{quote}{url}{quote}"

    out.document = _IMG_SRC.sub(image, _FONT_URL.sub(font, document))
    return out


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
        self.scripted = True
        """Whether the document of the current or last render may run script (`runs_script`);
        true until a document is loaded."""
        self.kept_for: str | None = None
        """The tenant whose render left this tab without a reset (`TabPool.give_back`)."""
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
        if self._settings.renderer_page_audit:
            await install_axe(self._cdp)
        await self._page.goto(DOCUMENT_URL, wait_until="load")
        await self._clear(context, self._cdp)
        self._baseline = await self._probe()

    def bind(self, collector: DiagnosticsCollector) -> None:
        """Start a render: blocked requests and page events go to `collector`."""
        self.uses += 1
        self.scripted = True
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
        self.scripted = runs_script(extracted.document)
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
        # Chromium prints a page loaded after the reset with print media even though the
        # emulated media still shows as set: the next render emulates its media again.
        self._media = None
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


class TabPool:
    """Hands out, resets, replaces and closes document tabs; see the module docstring."""

    def __init__(self, settings: Settings, browsers: BrowserPool) -> None:
        self._settings = settings
        self._browsers = browsers
        self._limit = settings.renderer_slots + settings.renderer_spare_tabs
        self._ready: list[DocumentTab] = []
        self._alive: set[DocumentTab] = set()
        self._changed = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()
        self._warm_shape = (1.0, DEFAULT_WIDTH, DEFAULT_HEIGHT)
        self._stopping = False
        self.resets = 0
        """Resets begun, in the background or before a render (for tests and benchmarks)."""
        self.kept = 0
        """Tabs given back for their tenant's next render without a reset."""

    def start(self) -> None:
        """Open the first tabs in the background."""
        self._replenish()

    async def take(self, handle: BrowserHandle, render: RenderInput) -> DocumentTab:
        """A ready tab on `handle` at the render's scale; waits for one or opens one.

        First a tab the render's own tenant left without a reset, then a reset one; a tab left
        for another tenant is reset here, before this render sees it.
        """
        self._warm_shape = (render.scale, render.width, render.height)
        while True:
            self._drop_stale(handle)
            fits = [tab for tab in self._ready if tab.scale == render.scale]
            mine = [t for t in fits if t.kept_for is not None and t.kept_for == render.tenant]
            clean = [t for t in fits if t.kept_for is None]
            if mine or clean:
                tab = (mine or clean)[0]
                self._ready.remove(tab)
                return tab
            if fits:
                tab = fits[0]
                self._ready.remove(tab)
                if await self._reset_clean(tab):
                    return tab
                self._retire(tab)
                self._replenish()
                continue
            if len(self._alive) >= self._limit and self._ready:
                self._retire(self._ready.pop(0))
            if len(self._alive) < self._limit:
                return await self._open(handle, render)
            self._changed.clear()
            await self._changed.wait()

    def give_back(self, tab: DocumentTab, keep_for: str | None = None) -> None:
        """After a successful render: reset the tab in the background, or replace it if spent.

        With `keep_for` (the render ran no script and brought no files, `registry.py`) the tab
        is ready at once for that tenant's next render, which writes its document over this
        one without the reset; `take` resets it first for anyone else.
        """
        tab.unbind()
        if tab.uses >= self._settings.renderer_tab_reuse_limit or not self._usable(tab):
            self._retire(tab)
            self._replenish()
        elif keep_for is not None:
            tab.kept_for = keep_for
            self.kept += 1
            self._make_ready(tab)
        else:
            self._spawn(self._reset(tab))

    async def discard(self, tab: DocumentTab) -> None:
        """Close a tab now (after a failed render); raise `CleanupTimeoutError` if it hangs."""
        tab.unbind()
        self._forget(tab)
        try:
            await tab.close()
        finally:
            self._replenish()

    async def stop(self) -> None:
        """Stop opening and resetting, and close every tab the pool still holds."""
        self._stopping = True
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        tabs, self._ready = list(self._alive), []
        self._alive.clear()
        await asyncio.gather(*(self._close_quietly(tab) for tab in tabs))

    def _usable(self, tab: DocumentTab) -> bool:
        return not self._stopping and tab.handle is self._browsers.healthy()

    def _drop_stale(self, handle: BrowserHandle) -> None:
        stale = [tab for tab in self._ready if tab.handle is not handle or handle.gone.is_set()]
        for tab in stale:
            self._ready.remove(tab)
            self._retire(tab)

    def _forget(self, tab: DocumentTab) -> None:
        self._alive.discard(tab)
        self._changed.set()

    def _retire(self, tab: DocumentTab) -> None:
        self._forget(tab)
        self._spawn(self._close_quietly(tab))

    async def _open(self, handle: BrowserHandle, render: RenderInput) -> DocumentTab:
        tab = DocumentTab(handle, render.scale, self._settings)
        self._alive.add(tab)
        try:
            await tab.open(render.width, render.height)
        except BaseException:
            self._retire(tab)
            raise
        return tab

    def _replenish(self) -> None:
        handle = self._browsers.healthy()
        if handle is None or self._stopping:
            return
        scale, width, height = self._warm_shape
        while len(self._alive) < self._limit:
            tab = DocumentTab(handle, scale, self._settings)
            self._alive.add(tab)
            self._spawn(self._warm(tab, width, height))

    async def _warm(self, tab: DocumentTab, width: int, height: int) -> None:
        try:
            await tab.open(width, height)
        except Exception as exc:
            if not tab.handle.gone.is_set():
                log.warning("could not open a document tab: %s", _first_line(exc))
            self._retire(tab)
            return
        self._make_ready(tab)

    async def _reset(self, tab: DocumentTab) -> None:
        if await self._reset_clean(tab):
            self._make_ready(tab)
        else:
            self._retire(tab)
            self._replenish()

    async def _reset_clean(self, tab: DocumentTab) -> bool:
        """Reset `tab`; True when it verified clean (it is then kept for no one)."""
        self.resets += 1
        try:
            async with asyncio.timeout(self._settings.renderer_tab_reset_timeout_seconds):
                left = await tab.reset()
        except Exception as exc:
            if not tab.handle.gone.is_set():
                log.warning("document tab reset failed: %s", _first_line(exc))
            return False
        if left:
            log.warning("document tab kept state after its reset (%s); closing it", left)
            return False
        tab.kept_for = None
        return True

    def _make_ready(self, tab: DocumentTab) -> None:
        if tab in self._alive and self._usable(tab):
            self._ready.append(tab)
            self._changed.set()
        else:
            self._retire(tab)

    async def _close_quietly(self, tab: DocumentTab) -> None:
        try:
            await tab.close()
        except CleanupTimeoutError:
            if not tab.handle.gone.is_set():
                log.warning("a document tab hung on close; retiring its browser")
                self._browsers.retire(tab.handle)
        except Exception:
            log.exception("closing a document tab failed")

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else type(exc).__name__
