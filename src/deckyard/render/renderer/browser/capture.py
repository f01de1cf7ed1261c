"""One attempt's browser work (navigate or load, settle, capture) and its diagnostics.

A URL render opens a fresh browser context (no cookies, storage, cache or permissions carried over)
behind its own `EgressProxy`, which checks every request with the SSRF guard, and closes it
afterwards (`close()` tears both down within `renderer_cleanup_timeout_seconds`; the caller
retires the browser if that is exceeded). A document render runs in a `DocumentTab` handed in by
the registry: a context with no network that is reset and verified between renders (`tabs.py`).

**Diagnostics.** Collects what a page did wrong while rendering: errors, failed requests, overflow,
fonts. Listeners record console errors, uncaught exceptions and failed requests as they happen; the
egress proxy and the document router report blocked requests; one script run after the page settles
awaits `document.fonts.ready` and lists broken images, fonts that failed to load, elements
overflowing the viewport and text drawn in (nearly) its background's colour (one round trip to the
page instead of two). The script lays the page out first, then waits for `document.fonts.ready` and
for every loaded image to be decoded: the capture follows signals, not a fixed delay. Every list is
capped at `renderer_diagnostics_max_items` entries of at most `renderer_diagnostics_max_chars`
characters, and `truncated` says when something was dropped. A document render is then audited
(`audit.py`: axe-core's accessibility rules, missing glyphs, font fallbacks) after its capture,
and a render that asks for its `layout` gets it described in the same visit (`layout.py`).
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from playwright.async_api import Browser, BrowserContext, CDPSession, ConsoleMessage, Page, Request
from playwright.async_api import Error as PlaywrightError

from deckyard.config import Settings
from deckyard.render.protocol import (
    AccessibilityProblem,
    Diagnostics,
    GlyphProblem,
    RenderErrorCode,
    RenderInput,
    RequestProblem,
    Timings,
)
from deckyard.render.renderer.browser.audit import audit_page
from deckyard.render.renderer.browser.layout import page_layout
from deckyard.render.renderer.browser.pool import NO_PEER_NETWORK_SCRIPT
from deckyard.render.renderer.browser.tabs import DOCUMENT_ORIGIN, DocumentTab, close_context
from deckyard.render.renderer.proxy import BLOCKED_HEADER, EgressProxy
from deckyard.render.renderer.ssrf import UrlGuard

_BLOCKED_BY_US = "net::ERR_BLOCKED_BY_CLIENT"

INSPECT_SCRIPT = """async ([scanLimit, maxItems, minContrast]) => {
  // Lay out first, so every font the page uses has been asked for before fonts.ready is read.
  void document.documentElement.getBoundingClientRect();
  await document.fonts.ready;
  await Promise.all(Array.from(document.images)
    .filter((img) => img.complete && img.naturalWidth > 0)
    .map((img) => img.decode().catch(() => null)));
  const parse = (c) => {
    const m = c && c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat([1]);
  };
  const lum = (c) => {
    const f = (v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const pictures = new Set(
    ['IMG', 'VIDEO', 'CANVAS', 'SVG', 'PICTURE', 'IFRAME', 'OBJECT', 'EMBED']);
  const backdrop = (el, x, y) => {
    const stack = document.elementsFromPoint(x, y);
    const start = stack.indexOf(el);
    if (start < 0) return null;  // covered by another element: not judged here
    const layers = [];
    for (const under of stack.slice(start)) {
      const cs = getComputedStyle(under);
      if (pictures.has(under.tagName.toUpperCase()) || cs.backgroundImage !== 'none') return null;
      const bg = parse(cs.backgroundColor);
      if (bg && bg[3] > 0) { layers.push(bg); if (bg[3] >= 0.999) break; }
    }
    let color = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) color = over(layers[i], color);
    return color;
  };
  const invisible = [];
  const vw = window.innerWidth, vh = window.innerHeight;
  const doc = document.documentElement, body = document.body;
  const overflow = [];
  const all = body ? body.getElementsByTagName('*') : [];
  const count = Math.min(all.length, scanLimit);
  for (let i = 0; i < count && overflow.length < maxItems; i++) {
    const el = all[i];
    const r = el.getBoundingClientRect();
    if (r.width <= 1 && r.height <= 1) continue;  // empty, or visually hidden (screen readers)
    const style = getComputedStyle(el);
    const clipped = style.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1;
    const outside = r.right > vw + 1 || r.bottom > vh + 1 || r.left < -1 || r.top < -1;
    if (!outside && !clipped) continue;
    let name = el.tagName.toLowerCase();
    if (el.id) name += '#' + el.id;
    if (el.classList.length) name += '.' + Array.from(el.classList).slice(0, 3).join('.');
    const where = Math.round(r.left) + ',' + Math.round(r.top) + ' ' +
      Math.round(r.width) + 'x' + Math.round(r.height);
    overflow.push(name + ' at ' + where + (clipped ? ' (content clipped)' : ' (outside viewport)'));
  }
  // Hit-testing (elementsFromPoint) skips `pointer-events: none`, which pages set on what is
  // shown all the same (reveal.js on a slide with an interactive background): for this scan,
  // every element is hit as it is painted. The style changes no pixel and is removed after.
  const hitAll = document.createElement('style');
  hitAll.textContent = '* { pointer-events: auto !important; }';
  (document.head || document.documentElement).appendChild(hitAll);
  for (let i = 0; i < count && invisible.length < maxItems; i++) {
    const el = all[i];
    const text = Array.from(el.childNodes).filter((n) => n.nodeType === 3 && n.data.trim());
    const seen = el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
    if (!text.length || !seen || el.closest('svg, math')) continue;
    const own = el.getBoundingClientRect();
    if (own.width <= 1 || own.height <= 1) continue;  // visually hidden (screen readers only)
    const range = document.createRange();
    range.selectNodeContents(text[0]);
    const box = Array.from(range.getClientRects()).find((b) => b.width > 0 && b.height > 0);
    if (!box || box.right < 0 || box.bottom < 0 || box.left > vw || box.top > vh) continue;
    const x = Math.min(Math.max(box.left + box.width / 2, 0), vw - 1);
    const y = Math.min(Math.max(box.top + box.height / 2, 0), vh - 1);
    const under = backdrop(el, x, y);
    const fg = parse(getComputedStyle(el).color);
    if (!under || !fg) continue;
    const shown = over(fg, under);
    const hi = Math.max(lum(shown), lum(under)), lo = Math.min(lum(shown), lum(under));
    const ratio = (hi + 0.05) / (lo + 0.05);
    if (ratio >= minContrast) continue;
    let name = el.tagName.toLowerCase();
    if (el.classList.length) name += '.' + Array.from(el.classList).slice(0, 3).join('.');
    const words = text[0].data.trim().slice(0, 40);
    const rgb = (c) => 'rgb(' + c.slice(0, 3).map(Math.round).join(',') + ')';
    invisible.push(name + ' "' + words + '": text ' + rgb(shown) + ' on ' + rgb(under) +
      ' (contrast ' + ratio.toFixed(2) + ':1)');
  }
  hitAll.remove();
  return {
    overflow,
    invisibleText: invisible,
    width: Math.max(doc.scrollWidth, body ? body.scrollWidth : 0),
    height: Math.max(doc.scrollHeight, body ? body.scrollHeight : 0),
    brokenImages: Array.from(document.images)
      .filter((img) => !img.complete || img.naturalWidth === 0)
      .map((img) => img.currentSrc || img.src || '(no src)'),
    fontsNotLoaded: Array.from(document.fonts)
      .filter((font) => font.status === 'error')
      .map((font) => font.family),
  };
}"""


class DiagnosticsCollector:
    """Accumulates one attempt's diagnostics; `build()` returns them as a model."""

    def __init__(self, max_items: int, max_chars: int) -> None:
        self._max_items = max_items
        self._max_chars = max_chars
        self.truncated = False
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.failed: list[RequestProblem] = []
        self.blocked: list[RequestProblem] = []
        self.broken_images: list[str] = []
        self.fonts_not_loaded: list[str] = []
        self.overflow: list[str] = []
        self.invisible_text: list[str] = []
        self.accessibility: list[AccessibilityProblem] = []
        self.missing_glyphs: list[GlyphProblem] = []
        self.font_fallbacks: list[GlyphProblem] = []
        self.document_width: int | None = None
        self.document_height: int | None = None
        self.navigation_blocked: str | None = None
        self.layout: dict[str, Any] | None = None
        self.aliases: dict[str, str] = {}
        """URL -> the name to report it under (a served `data:` URI shows as that URI)."""

    def _cut(self, text: str) -> str:
        if len(text) > self._max_chars:
            self.truncated = True
            return text[: self._max_chars - 1] + "…"
        return text

    def _room(self, items: list[Any]) -> bool:
        if len(items) >= self._max_items:
            self.truncated = True
            return False
        return True

    def _shown(self, url: str) -> str:
        return self._cut(self.aliases.get(url, url))

    def add_blocked(self, url: str, reason: str) -> None:
        """Record a request the renderer refused."""
        if self._room(self.blocked):
            self.blocked.append(RequestProblem(url=self._shown(url), reason=self._cut(reason)))

    def block_navigation(self, url: str, reason: str) -> None:
        """Record that the document tried to replace itself by loading `url`."""
        if self.navigation_blocked is None:
            self.navigation_blocked = self._cut(url)
        self.add_blocked(url, reason)

    def on_console(self, message: ConsoleMessage) -> None:
        """Record a console error (not the ones our own request blocking causes)."""
        if message.type != "error" or _BLOCKED_BY_US in message.text:
            return
        if self._room(self.console_errors):
            self.console_errors.append(self._cut(message.text))

    def on_page_error(self, error: PlaywrightError) -> None:
        """Record an uncaught exception in the page."""
        if self._room(self.page_errors):
            self.page_errors.append(self._cut(error.message or str(error)))

    def on_request_failed(self, request: Request) -> None:
        """Record a request that failed (not the ones blocked by the renderer)."""
        failure = request.failure or "failed"
        if _BLOCKED_BY_US in failure or not self._room(self.failed):
            return
        self.failed.append(RequestProblem(url=self._shown(request.url), reason=self._cut(failure)))

    def attach(self, page: Page) -> None:
        """Start listening to the page's console, exceptions and failed requests."""
        page.on("console", self.on_console)
        page.on("pageerror", self.on_page_error)
        page.on("requestfailed", self.on_request_failed)

    async def inspect(self, page: Page, scan_limit: int, min_contrast: float = 1.2) -> None:
        """Await `document.fonts.ready`, then list broken images, failed fonts, overflow, size.

        Text whose colour is too close to what is behind it (contrast under `min_contrast`
        against the background colours under it; unknown over images) is listed as invisible.
        """
        args = [scan_limit, self._max_items, min_contrast]
        found: dict[str, Any] = await page.evaluate(INSPECT_SCRIPT, args)
        self.document_width = int(found["width"])
        self.document_height = int(found["height"])
        for key, target in (
            ("overflow", self.overflow),
            ("invisibleText", self.invisible_text),
            ("brokenImages", self.broken_images),
            ("fontsNotLoaded", self.fonts_not_loaded),
        ):
            for item in found[key]:
                if self._room(target):
                    target.append(self._shown(str(item)))

    def add_audit(
        self,
        accessibility: list[AccessibilityProblem],
        missing: list[GlyphProblem],
        fallbacks: list[GlyphProblem],
    ) -> None:
        """Record what the audit after the capture found (capped like every list)."""
        for problem in accessibility:
            if self._room(self.accessibility):
                self.accessibility.append(
                    problem.model_copy(
                        update={
                            "target": self._cut(problem.target),
                            "message": self._cut(problem.message),
                        }
                    )
                )
        for found, target in ((missing, self.missing_glyphs), (fallbacks, self.font_fallbacks)):
            for glyph in found:
                if self._room(target):
                    cut = {"text": self._cut(glyph.text), "characters": self._cut(glyph.characters)}
                    target.append(glyph.model_copy(update=cut))

    def build(self, timings: Timings) -> Diagnostics:
        """The diagnostics gathered so far."""
        return Diagnostics(
            console_errors=self.console_errors,
            page_errors=self.page_errors,
            failed_requests=self.failed,
            blocked_requests=self.blocked,
            broken_images=self.broken_images,
            fonts_not_loaded=self.fonts_not_loaded,
            overflow=self.overflow,
            invisible_text=self.invisible_text,
            accessibility=self.accessibility,
            missing_glyphs=self.missing_glyphs,
            font_fallbacks=self.font_fallbacks,
            document_width=self.document_width,
            document_height=self.document_height,
            truncated=self.truncated,
            timings=timings,
            layout=self.layout,
        )


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

    async def capture(self) -> bytes | None:
        """Navigate, wait as asked, inspect and capture; raise `RenderFailure` on content errors.

        None for a render that asked for no picture (`capture` false): its diagnostics are all.
        """
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
            data = None
            if self._render.capture:
                capture_start = time.monotonic()
                data = await self._shoot(page)
                self.timings.capture_ms = _ms(capture_start)
            if self._render.layout:
                self._collector.layout = await page_layout(
                    page,
                    self._settings.renderer_layout_max_items,
                    self._settings.renderer_layout_max_chars,
                )
            if self._tab is not None and self._settings.renderer_page_audit and self._render.audit:
                audit_start = time.monotonic()
                found = await audit_page(
                    page, self._tab.cdp, glyph_limit=self._settings.renderer_glyph_scan_limit
                )
                self._collector.add_audit(*found)
                self.timings.audit_ms = _ms(audit_start)
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
                tagged=render.pdf_tagged,
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
