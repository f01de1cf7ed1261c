"""Collects what a page did wrong while rendering: errors, failed requests, overflow, fonts.

Listeners record console errors, uncaught exceptions and failed requests as they happen; the
egress proxy and the document router report blocked requests; one script run after the page
settles awaits `document.fonts.ready` and lists broken images, fonts that failed to load,
elements overflowing the viewport and text drawn in (nearly) its background's colour (one round
trip to the page instead of two). The script lays the page out first, then waits for
`document.fonts.ready` and for every loaded image to be decoded: the capture follows signals, not
a fixed delay.
Every list is capped at `renderer_diagnostics_max_items` entries of at most
`renderer_diagnostics_max_chars` characters, and `truncated` says when something was dropped.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import ConsoleMessage, Page, Request
from playwright.async_api import Error as PlaywrightError

from deckyard.render.protocol import Diagnostics, RequestProblem, Timings

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
    const layers = [];
    for (const under of start < 0 ? [] : stack.slice(start)) {
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
        self.document_width: int | None = None
        self.document_height: int | None = None
        self.navigation_blocked: str | None = None
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
            document_width=self.document_width,
            document_height=self.document_height,
            truncated=self.truncated,
            timings=timings,
        )
