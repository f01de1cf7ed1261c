"""One attempt's browser work: a fresh context behind its own proxy, navigate, settle, capture.

A `CaptureSession` opens a new browser context per attempt (no cookies, storage, cache or
permissions carried over), routes it through a per-attempt `EgressProxy`, and for document renders
also aborts every request except the document itself. `close()` tears both down within
`renderer_cleanup_timeout_seconds`; the caller kills the browser if that is exceeded.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from playwright.async_api import Browser, BrowserContext, Page, Route, WebSocketRoute
from playwright.async_api import Error as PlaywrightError

from deckyard.config import Settings
from deckyard.render.errors import RenderErrorCode
from deckyard.render.worker.diagnostics import DiagnosticsCollector
from deckyard.render.worker.models import RenderInput, Timings
from deckyard.render.worker.proxy import BLOCKED_HEADER, EgressProxy
from deckyard.render.worker.ssrf import UrlGuard

DOCUMENT_URL = "http://document.deckyard.invalid/"
DOCUMENT_HOST = "document.deckyard.invalid"
_NO_NETWORK = "network access is disabled for document renders"


class RenderFailure(Exception):
    """A render failed for a reason with an error code."""

    def __init__(self, code: RenderErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class CleanupTimeoutError(Exception):
    """Closing the attempt's browser context took longer than allowed."""


def _ms(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 1)


class CaptureSession:
    """Renders one input in its own context; call `open`, `capture`, then always `close`."""

    def __init__(
        self,
        browser: Browser,
        render: RenderInput,
        guard: UrlGuard,
        settings: Settings,
        collector: DiagnosticsCollector,
    ) -> None:
        self._browser = browser
        self._render = render
        self._settings = settings
        self._collector = collector
        self._proxy = EgressProxy(
            guard if render.url is not None else None,
            collector.add_blocked,
            quiet_hosts=frozenset() if render.url is not None else frozenset({DOCUMENT_HOST}),
        )
        self._context: BrowserContext | None = None
        self.timings = Timings()

    async def open(self) -> None:
        """Start the proxy and create the context; document renders get a deny-all router."""
        proxy_url = await self._proxy.start()
        render = self._render
        self._context = await self._browser.new_context(
            viewport={"width": render.width, "height": render.height},
            device_scale_factor=render.scale,
            proxy={"server": proxy_url, "bypass": "<-loopback>"},
            service_workers="block",
            accept_downloads=False,
        )
        if render.document is not None:
            await self._context.route("**/*", self._route_document)
            await self._context.route_web_socket("**/*", self._refuse_socket)

    async def _route_document(self, route: Route) -> None:
        request = route.request
        try:
            if request.url == DOCUMENT_URL and request.is_navigation_request():
                await route.fulfill(
                    body=self._render.document or "", content_type="text/html; charset=utf-8"
                )
            else:
                self._collector.add_blocked(request.url, _NO_NETWORK)
                await route.abort("blockedbyclient")
        except PlaywrightError:
            return

    async def _refuse_socket(self, socket: WebSocketRoute) -> None:
        self._collector.add_blocked(socket.url, _NO_NETWORK)
        try:
            await socket.close()
        except PlaywrightError:
            return

    async def capture(self) -> bytes:
        """Navigate, wait as asked, inspect and capture; raise `RenderFailure` on content errors."""
        assert self._context is not None
        started = time.monotonic()
        page = await self._context.new_page()
        self._collector.attach(page)
        await page.emulate_media(media=self._render.media)
        await self._navigate(page)
        self.timings.navigate_ms = _ms(started)
        settle_start = time.monotonic()
        await self._settle(page)
        self.timings.settle_ms = _ms(settle_start)
        capture_start = time.monotonic()
        data = await self._shoot(page)
        self.timings.capture_ms = _ms(capture_start)
        return data

    async def _navigate(self, page: Page) -> None:
        render = self._render
        target = render.url if render.url is not None else DOCUMENT_URL
        try:
            response = await page.goto(target, wait_until=render.wait.until, timeout=0)
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
        await page.evaluate("document.fonts.ready.then(() => true)")
        if wait.delay_ms:
            await asyncio.sleep(wait.delay_ms / 1000)
        await self._collector.inspect(page, self._settings.renderer_overflow_scan_limit)
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
            return await self._webp(page, clip)
        return await page.screenshot(
            type=render.format,
            quality=render.quality if render.format == "jpeg" else None,
            full_page=render.full_page,
            clip=clip,  # type: ignore[arg-type]
            omit_background=render.omit_background,
            timeout=0,
        )

    async def _webp(self, page: Page, clip: dict[str, float] | None) -> bytes:
        assert self._context is not None
        render = self._render
        cdp = await self._context.new_cdp_session(page)
        if render.omit_background:
            transparent = {"color": {"r": 0, "g": 0, "b": 0, "a": 0}}
            await cdp.send("Emulation.setDefaultBackgroundColorOverride", transparent)
        params: dict[str, Any] = {"format": "webp", "captureBeyondViewport": render.full_page}
        if render.quality is not None:
            params["quality"] = render.quality
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        elif render.full_page:
            width = max(self._collector.document_width or 0, render.width)
            height = max(self._collector.document_height or 0, render.height)
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        result = await cdp.send("Page.captureScreenshot", params)
        return base64.b64decode(result["data"])

    async def close(self) -> None:
        """Close the context and the proxy; raise `CleanupTimeoutError` if the context hangs."""
        timeout = self._settings.renderer_cleanup_timeout_seconds
        context, self._context = self._context, None
        try:
            if context is not None:
                task = asyncio.ensure_future(context.close())
                try:
                    await asyncio.wait_for(asyncio.shield(task), timeout)
                except TimeoutError:
                    task.cancel()
                    raise CleanupTimeoutError(f"context did not close within {timeout}s") from None
                except PlaywrightError:
                    pass
        finally:
            await self._proxy.close()
