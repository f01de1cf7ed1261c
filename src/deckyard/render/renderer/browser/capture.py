"""One attempt's browser work: navigate or load, settle, capture, in a context of its own.

A URL render opens a fresh browser context (no cookies, storage, cache or permissions carried
over) behind its own `EgressProxy`, which checks every request with the SSRF guard, and closes it
afterwards (`close()` tears both down within `renderer_cleanup_timeout_seconds`; the caller kills
the browser if that is exceeded). A document render runs in a `DocumentTab` handed in by the
registry: a context with no network that is reset and verified between renders (`tabs.py`).
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from playwright.async_api import Browser, BrowserContext, CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from deckyard.config import Settings
from deckyard.render.protocol import RenderErrorCode, RenderInput, Timings
from deckyard.render.renderer.browser.diagnostics import DiagnosticsCollector
from deckyard.render.renderer.browser.pool import NO_PEER_NETWORK_SCRIPT
from deckyard.render.renderer.browser.tabs import DOCUMENT_ORIGIN, DocumentTab, close_context
from deckyard.render.renderer.proxy import BLOCKED_HEADER, EgressProxy
from deckyard.render.renderer.ssrf import UrlGuard


class RenderFailure(Exception):
    """A render failed for a reason with an error code."""

    def __init__(self, code: RenderErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _ms(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 1)


class CaptureSession:
    """Renders one input; call `open`, `capture`, then always `close`.

    With a `tab` (document renders) the session borrows the tab's page; the registry gives the
    tab back or discards it. Without one (URL renders) it owns a fresh context and proxy.
    """

    def __init__(
        self,
        browser: Browser,
        render: RenderInput,
        guard: UrlGuard,
        settings: Settings,
        collector: DiagnosticsCollector,
        tab: DocumentTab | None = None,
    ) -> None:
        self._browser = browser
        self._render = render
        self._settings = settings
        self._collector = collector
        self._tab = tab
        self._proxy = EgressProxy(guard, collector.add_blocked, quiet_hosts=frozenset())
        self._context: BrowserContext | None = None
        self.timings = Timings()

    async def open(self) -> None:
        """Bind the document tab, or start the proxy and create a fresh context for a URL."""
        if self._tab is not None:
            self._tab.bind(self._collector)
            return
        proxy_url = await self._proxy.start()
        render = self._render
        self._context = await self._browser.new_context(
            viewport={"width": render.width, "height": render.height},
            device_scale_factor=render.scale,
            proxy={"server": proxy_url, "bypass": "<-loopback>"},
            service_workers="block",
            accept_downloads=False,
        )
        await self._context.add_init_script(NO_PEER_NETWORK_SCRIPT)

    async def capture(self) -> bytes:
        """Navigate, wait as asked, inspect and capture; raise `RenderFailure` on content errors."""
        started = time.monotonic()
        if self._tab is not None:
            page = self._tab.page
            await self._tab.prepare(self._render)
            await self._load(self._tab)
        else:
            assert self._context is not None
            page = await self._context.new_page()
            self._collector.attach(page)
            await page.emulate_media(media=self._render.media)
            await self._navigate(page)
        self.timings.navigate_ms = _ms(started)
        try:
            settle_start = time.monotonic()
            await self._settle(page)
            self.timings.settle_ms = _ms(settle_start)
            capture_start = time.monotonic()
            data = await self._shoot(page)
            self.timings.capture_ms = _ms(capture_start)
        except PlaywrightError:
            self._check_still_there(page)
            raise
        self._check_still_there(page)
        return data

    def _check_still_there(self, page: Page) -> None:
        """Refuse a document render whose page navigated away (the capture shows another page).

        The tab refuses the navigation itself, so what is left is Chromium's error page, or a
        page whose scripts died with the document ("Execution context was destroyed").
        """
        if self._tab is None or page.is_closed():
            return
        target = self._collector.navigation_blocked
        if target is None and not page.url.startswith(DOCUMENT_ORIGIN + "/"):
            target = page.url
        if target is not None:
            raise RenderFailure(
                RenderErrorCode.NAVIGATION_BLOCKED,
                f"the document navigated its page away (to {target}); a document render "
                "must stay on its document",
            )

    async def _load(self, tab: DocumentTab) -> None:
        try:
            await tab.load(self._render)
        except PlaywrightError as exc:
            if tab.page.is_closed():
                raise
            message = (exc.message or str(exc)).splitlines()[0]
            raise RenderFailure(RenderErrorCode.NAVIGATION_FAILED, message) from None

    async def _navigate(self, page: Page) -> None:
        render = self._render
        assert render.url is not None
        try:
            response = await page.goto(render.url, wait_until=render.wait.until, timeout=0)
        except PlaywrightError as exc:
            message = (exc.message or str(exc)).splitlines()[0]
            if self._proxy.blocked_hosts and "ERR_TUNNEL_CONNECTION_FAILED" in message:
                raise RenderFailure(RenderErrorCode.SSRF_BLOCKED, message) from None
            raise RenderFailure(RenderErrorCode.NAVIGATION_FAILED, message) from None
        if response is None:
            return
        blocked = await response.header_value(BLOCKED_HEADER)
        if blocked:
            raise RenderFailure(RenderErrorCode.SSRF_BLOCKED, f"{response.url}: {blocked}")
        if response.status >= 400:
            raise RenderFailure(
                RenderErrorCode.NAVIGATION_FAILED, f"HTTP {response.status} from {response.url}"
            )

    async def _settle(self, page: Page) -> None:
        wait = self._render.wait
        if wait.selector is not None:
            await page.wait_for_selector(wait.selector, state="visible", timeout=0)
        if wait.expression is not None:
            try:
                await page.wait_for_function(wait.expression, timeout=0)
            except PlaywrightError as exc:
                if page.is_closed():
                    raise
                message = (exc.message or str(exc)).splitlines()[0]
                raise RenderFailure(RenderErrorCode.WAIT_FAILED, message) from None
        if wait.delay_ms:
            await page.evaluate("document.fonts.ready.then(() => true)")
            await asyncio.sleep(wait.delay_ms / 1000)
        await self._collector.inspect(
            page,
            self._settings.renderer_overflow_scan_limit,
            self._settings.renderer_min_text_contrast,
        )
        if self._render.fail_on_page_error and self._collector.page_errors:
            raise RenderFailure(RenderErrorCode.PAGE_ERROR, self._collector.page_errors[0])

    async def _clip(self, page: Page) -> dict[str, float] | None:
        selector = self._render.clip_selector
        if selector is None:
            return None
        element = await page.query_selector(selector)
        box = await element.bounding_box() if element is not None else None
        if box is None or box["width"] <= 0 or box["height"] <= 0:
            raise RenderFailure(
                RenderErrorCode.SELECTOR_NOT_FOUND, f"clip_selector {selector!r} matches no box"
            )
        return {"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"]}

    async def _shoot(self, page: Page) -> bytes:
        render = self._render
        if render.full_page:
            height = max(self._collector.document_height or 0, render.height)
            width = max(self._collector.document_width or 0, render.width)
            if width * height * render.scale**2 > self._settings.renderer_max_pixels:
                raise RenderFailure(
                    RenderErrorCode.OUTPUT_TOO_LARGE,
                    f"full page {width}x{height} at scale {render.scale} exceeds the pixel limit",
                )
        clip = await self._clip(page)
        if render.format == "pdf":
            return await page.pdf(
                width=f"{render.width}px",
                height=f"{render.height}px",
                print_background=not render.omit_background,
            )
        if render.format == "webp":
            return await self._cdp_capture(page, clip)
        viewport = not render.full_page and clip is None
        if render.format == "png" and self._tab is not None and viewport:
            return await self._cdp_capture(page, None)
        return await page.screenshot(
            type=render.format,
            quality=render.quality if render.format == "jpeg" else None,
            full_page=render.full_page,
            clip=clip,  # type: ignore[arg-type]
            omit_background=render.omit_background,
            timeout=0,
        )

    async def _cdp_capture(self, page: Page, clip: dict[str, float] | None) -> bytes:
        """`Page.captureScreenshot` straight over CDP: webp, and viewport PNGs of a tab.

        Playwright's screenshot has no webp, and for a PNG of the viewport it adds driver round
        trips (a fonts wait the settle step already did, caret hiding) to the same call; here a
        PNG is encoded with `optimizeForSpeed` (faster zlib settings, same pixels, a larger
        file). Leak: the caret of a focused text field is not hidden, as it is in a URL render.
        """
        render = self._render
        if self._tab is not None:
            cdp: CDPSession = self._tab.cdp
        else:
            assert self._context is not None
            cdp = await self._context.new_cdp_session(page)
        if render.omit_background:
            transparent = {"color": {"r": 0, "g": 0, "b": 0, "a": 0}}
            await cdp.send("Emulation.setDefaultBackgroundColorOverride", transparent)
        params: dict[str, Any] = {
            "format": render.format,
            "captureBeyondViewport": render.full_page,
        }
        if render.format == "png":
            params["optimizeForSpeed"] = True
        if render.quality is not None:
            params["quality"] = render.quality
        # The clip's scale is the render's: this CDP session is not the one Playwright set the
        # device scale on, so a capture at scale 1 here would come out in CSS pixels.
        scale = render.scale
        if clip is not None:
            params["clip"] = {**clip, "scale": scale}
        elif render.full_page:
            width = max(self._collector.document_width or 0, render.width)
            height = max(self._collector.document_height or 0, render.height)
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": scale}
        else:
            view = (await cdp.send("Page.getLayoutMetrics"))["cssVisualViewport"]
            params["clip"] = {
                "x": view["pageX"],
                "y": view["pageY"],
                "width": render.width,
                "height": render.height,
                "scale": scale,
            }
        try:
            result = await cdp.send("Page.captureScreenshot", params)
        finally:
            if render.omit_background:
                await cdp.send("Emulation.setDefaultBackgroundColorOverride")
        return base64.b64decode(result["data"])

    async def close(self) -> None:
        """Unbind the tab, or close the context and the proxy (`CleanupTimeoutError` on a hang)."""
        if self._tab is not None:
            self._tab.unbind()
            return
        context, self._context = self._context, None
        try:
            if context is not None:
                await close_context(context, self._settings.renderer_cleanup_timeout_seconds)
        finally:
            await self._proxy.close()
