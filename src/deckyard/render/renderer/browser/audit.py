"""A document's audit after its capture: axe-core's accessibility rules, glyphs and fonts.

Runs in the same visit as the render, after the picture was taken (nothing the audit does to
the page can show in it), over one CDP session of its own that is detached afterwards.

**Accessibility.** axe-core (`vendor/js/package.json`, pinned by its lock file; read once per
process) runs the rules in `AXE_RULES` only, about 20 ms on a slide. It lives in an isolated
world of the tab (`AUDIT_WORLD`: the page's DOM, none of its script), put there by
`install_axe` for every new document the tab opens. A render writes its document into the
parked one (`set_content`, which keeps the window and its worlds), so the ~70-110 ms that
evaluating the bundle costs is paid when the tab opens or resets, off the render's critical
path, and not at all for a tab kept for its tenant; a world found without axe (the tab was
opened before the audit was turned on) gets it at the audit. The page's own script can neither
see nor change the audit's axe. Without the package (a wheel install without the checkout) the
rules are skipped, and that is logged once.

**Glyphs and fonts.** For each visible element with text of its own (up to
`renderer_glyph_scan_limit`, outside SVG and MathML) Chromium says which platform fonts drew
that text (`CSS.getPlatformFontsForNode`). Two findings come from that, never from a guess:

* a *missing glyph*: a character (not whitespace, a control or a format character) that no
  installed font covers, per fontconfig's own coverage (`fc-list`, what Chromium's fallback
  asks on Linux), in text that no web font drew. Leak: text drawn in part with a web font of
  the page is not checked, since the web font may have the glyph (icon fonts live in the
  Private Use Area) and its coverage is not read here.
* a *font fallback*: an element that names font families (`font-family` beyond the generic
  ones like `sans-serif`) whose text none of them drew, nor any web font: the fonts it asked
  for are not there, or do not have its characters. The browser's default family (what
  `font-family: initial` gives, "Times New Roman") was not named by the page and is not
  checked; leak: neither is a page that names exactly that family.

The two halves run side by side (`audit_page`): axe-core works in the renderer's main thread
while the font queries' round trips wait, and the font queries take four sequential round trips
however many elements they ask about (`check_fonts`).

Findings are merged per page: one per `font-family` for missing glyphs (with every character
concerned), one per `font-family` and fonts used for fallbacks.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import secrets
import subprocess
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from deckyard.render.protocol import AccessibilityProblem, GlyphProblem

log = logging.getLogger(__name__)

AXE_BUNDLE = (
    Path(__file__).resolve().parents[5]
    / "vendor"
    / "js"
    / "node_modules"
    / "axe-core"
    / "axe.min.js"
)
AUDIT_WORLD = "deckyard-audit"
"""The isolated world axe-core runs in (`install_axe`)."""
AXE_RULES = (
    "image-alt",
    "color-contrast",
    "heading-order",
    "html-has-lang",
    "html-lang-valid",
    "link-name",
)
_AXE_RUN = """axe.run(document, {
  runOnly: { type: 'rule', values: %s },
  resultTypes: ['violations'],
  preload: false,
  iframes: false,
  performanceTimer: false,
  elementRef: false,
  ancestry: false,
  xpath: false,
}).then((found) => found.violations.flatMap((v) => v.nodes.map((node) => ({
  rule: v.id,
  impact: v.impact || null,
  help: v.help,
  target: node.target.join(' '),
  summary: node.failureSummary || '',
}))))"""

GLYPH_MARK = "data-deckyard-glyph"
"""The attribute the glyph scan marks the elements it asks about with (valued with a token of
the scan), so one `DOM.querySelectorAll` finds their node ids in document order."""
_GLYPH_SCAN = """((limit, mark, token) => {
  const generic = new Set(['serif', 'sans-serif', 'monospace', 'cursive', 'fantasy',
    'system-ui', 'emoji', 'math', 'fangsong', 'ui-serif', 'ui-sans-serif', 'ui-monospace',
    'ui-rounded']);
  const info = [];
  const all = document.body ? document.body.getElementsByTagName('*') : [];
  let initial = null;
  if (document.body) {  // the browser's own default family, which the page did not name
    const probe = document.createElement('span');
    probe.style.fontFamily = 'initial';
    document.body.appendChild(probe);
    initial = getComputedStyle(probe).fontFamily;
    probe.remove();
  }
  // One element is asked about per font-family and new characters: an element whose every
  // character an earlier one of the same family already had says nothing new (it was 50-110 ms
  // of CDP queries a page when every text element was asked about).
  const seen = new Map();
  for (let i = 0; i < all.length && info.length < limit; i++) {
    const el = all[i];
    const parts = Array.from(el.childNodes).filter((n) => n.nodeType === 3).map((n) => n.data);
    const text = parts.join('').trim();
    if (!text || el.closest('svg, math')) continue;
    let family = getComputedStyle(el).fontFamily;
    const had = seen.get(family) || new Set();
    const fresh = Array.from(new Set(text)).filter((c) => !had.has(c));
    if (!fresh.length) continue;
    if (!el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) continue;
    fresh.forEach((c) => had.add(c));
    seen.set(family, had);
    const own = family !== initial;
    if (!own) family += " (the browser's default)";
    const named = !own ? [] : family.split(',').map((f) => f.trim().replace(/^["']|["']$/g, ''))
      .filter((f) => f && !generic.has(f.toLowerCase()));
    let name = el.tagName.toLowerCase();
    if (el.classList.length) name += '.' + Array.from(el.classList).slice(0, 3).join('.');
    el.setAttribute(mark, token);
    info.push({ element: name, text: text.slice(0, 40), family, named,
      chars: Array.from(new Set(text)).slice(0, 500).join('') });
  }
  return info;
})(%d, %s, %s)"""
_GLYPH_UNMARK = """document.querySelectorAll('[%s]').forEach((el) => el.removeAttribute('%s'))"""

_IGNORABLE = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
"""Unicode categories drawn without a glyph of their own (whitespace, controls, joiners)."""


@lru_cache(maxsize=1)
def axe_bundle() -> str | None:
    """axe-core's browser bundle; None when the package is not installed."""
    try:
        return AXE_BUNDLE.read_text(encoding="utf-8")
    except OSError:
        log.warning("axe-core is not installed (%s): accessibility checks are off", AXE_BUNDLE)
        return None


@dataclass(frozen=True)
class Coverage:
    """The code points some installed font has a glyph for, as sorted disjoint ranges."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def __contains__(self, code: object) -> bool:
        if not isinstance(code, int):
            return False
        at = bisect.bisect_right(self.starts, code) - 1
        return at >= 0 and code <= self.ends[at]


def parse_charsets(listing: str) -> Coverage | None:
    """The union of `fc-list --format '%{charset}\\n'` output ("20-7e a0-17f ..." per font)."""
    ranges: list[tuple[int, int]] = []
    for token in listing.split():
        first, _, last = token.partition("-")
        try:
            ranges.append((int(first, 16), int(last or first, 16)))
        except ValueError:
            continue
    if not ranges:
        return None
    ranges.sort()
    merged = [list(ranges[0])]
    for start, end in ranges[1:]:
        if start <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return Coverage(tuple(r[0] for r in merged), tuple(r[1] for r in merged))


@lru_cache(maxsize=1)
def installed_coverage() -> Coverage | None:
    """What the installed fonts cover, asked of fontconfig once per process; None if unknown."""
    try:
        done = subprocess.run(
            ["fc-list", "--format", "%{charset}\n"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("fc-list failed (%s): missing glyphs are not checked", exc)
        return None
    return parse_charsets(done.stdout)


def needs_glyph(char: str) -> bool:
    """Whether `char` is drawn with a glyph (not whitespace, a control, a joiner, a selector)."""
    code = ord(char)
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return False
    return unicodedata.category(char) not in _IGNORABLE


def describe_chars(chars: str) -> str:
    """`chars` as quoted characters with their code points: `"\\ue000" (U+E000)`."""
    return ", ".join(f"{c!r} (U+{ord(c):04X})" for c in chars)


class FontFindings:
    """Merges per-element font answers into per-page missing glyphs and fallbacks."""

    def __init__(self, coverage: Coverage | None) -> None:
        self._coverage = coverage
        self.missing: dict[str, GlyphProblem] = {}
        self.fallbacks: dict[tuple[str, tuple[str, ...]], GlyphProblem] = {}

    def add(self, info: dict[str, Any], fonts: list[dict[str, Any]]) -> None:
        """Judge one element from its scan `info` and the platform fonts that drew it."""
        if not fonts:
            return
        used = sorted({str(f.get("familyName", "")) for f in fonts})
        web = any(f.get("isCustomFont") for f in fonts)
        family = str(info["family"])
        if self._coverage is not None and not web:
            lost = [
                c for c in str(info["chars"]) if needs_glyph(c) and ord(c) not in self._coverage
            ]
            if lost:
                self._add_missing(info, family, used, lost)
        named = {str(n).lower() for n in info["named"]}
        drawn = {str(f.get(k, "")).lower() for f in fonts for k in ("familyName", "postScriptName")}
        if named and not web and not named & drawn:
            key = (family, tuple(used))
            if key not in self.fallbacks:
                self.fallbacks[key] = _problem(info, family, used, "")

    def _add_missing(
        self, info: dict[str, Any], family: str, used: list[str], lost: list[str]
    ) -> None:
        known = self.missing.get(family)
        if known is None:
            self.missing[family] = _problem(info, family, used, "".join(lost))
            return
        chars = known.characters + "".join(c for c in lost if c not in known.characters)
        drawn = sorted(set(known.drawn_with) | set(used))
        self.missing[family] = known.model_copy(update={"characters": chars, "drawn_with": drawn})


def _problem(info: dict[str, Any], family: str, used: list[str], chars: str) -> GlyphProblem:
    return GlyphProblem(
        element=str(info["element"]),
        text=str(info["text"]),
        characters=chars,
        requested=family,
        drawn_with=used,
    )


async def install_axe(cdp: CDPSession) -> None:
    """Have every new document of `cdp`'s page load axe-core into `AUDIT_WORLD`.

    `cdp` must be the session `run_axe` is later given: Chromium names isolated worlds per session.
    """
    bundle = axe_bundle()
    if bundle is None:
        return
    await cdp.send("Page.enable")
    await cdp.send(
        "Page.addScriptToEvaluateOnNewDocument", {"source": bundle, "worldName": AUDIT_WORLD}
    )


async def _audit_world(cdp: CDPSession) -> int:
    """The execution context of `AUDIT_WORLD` in the page's main frame (made if it is not there)."""
    tree = await cdp.send("Page.getFrameTree")
    world = await cdp.send(
        "Page.createIsolatedWorld",
        {"frameId": tree["frameTree"]["frame"]["id"], "worldName": AUDIT_WORLD},
    )
    return int(world["executionContextId"])


async def run_axe(cdp: CDPSession, context: int) -> list[AccessibilityProblem]:
    """axe-core's `AXE_RULES` on the page, from `AUDIT_WORLD` (`context`, of `cdp`); [] when
    axe-core is not installed."""
    bundle = axe_bundle()
    if bundle is None:
        return []
    there = await cdp.send(
        "Runtime.evaluate",
        {"expression": "typeof axe", "contextId": context, "returnByValue": True},
    )
    if there["result"].get("value") != "object":
        loaded = await cdp.send(
            "Runtime.evaluate", {"expression": bundle, "contextId": context, "silent": True}
        )
        if "exceptionDetails" in loaded:
            log.warning("axe-core did not load in the page: %s", loaded["exceptionDetails"])
            return []
    rules = "[" + ", ".join(f"'{rule}'" for rule in AXE_RULES) + "]"
    found = await cdp.send(
        "Runtime.evaluate",
        {
            "expression": _AXE_RUN % rules,
            "contextId": context,
            "awaitPromise": True,
            "returnByValue": True,
        },
    )
    if "exceptionDetails" in found:
        log.warning("axe-core failed on the page: %s", found["exceptionDetails"])
        return []
    return [
        AccessibilityProblem(
            rule=str(item["rule"]),
            impact=item.get("impact"),
            target=str(item["target"]),
            message=_axe_message(str(item["help"]), str(item["summary"])),
        )
        for item in found["result"].get("value") or []
    ]


def _axe_message(help_text: str, summary: str) -> str:
    """axe's one-line help plus the first reason it gives ("Fix any of the following: ...")."""
    reasons = [line.strip() for line in summary.splitlines()[1:] if line.strip()]
    return f"{help_text} ({reasons[0]})" if reasons else help_text


async def check_fonts(
    cdp: CDPSession, world: CDPSession, context: int, limit: int
) -> tuple[list[GlyphProblem], list[GlyphProblem]]:
    """Missing glyphs and font fallbacks of up to `limit` text-bearing elements.

    The scan runs in `AUDIT_WORLD` (`context`, of session `world`: the page's script cannot
    change what it calls). It marks the elements it picks (`GLYPH_MARK`, valued with a fresh
    token) and answers their descriptions by value; one `DOM.querySelectorAll` over `cdp` then
    gives their node ids in the same (document) order, and the marks are removed while Chromium
    answers the font queries. A page whose marked elements do not match the scan's count (its
    script changed the DOM in between) gets no font findings.
    """
    if limit <= 0:
        return [], []
    coverage = await asyncio.to_thread(installed_coverage)
    await cdp.send("DOM.enable")
    await cdp.send("CSS.enable")
    root = await cdp.send("DOM.getDocument", {"depth": 0})
    token = secrets.token_hex(8)
    expression = _GLYPH_SCAN % (limit, json.dumps(GLYPH_MARK), json.dumps(token))
    scan = await world.send(
        "Runtime.evaluate",
        {"expression": expression, "contextId": context, "silent": True, "returnByValue": True},
    )
    info = scan["result"].get("value")
    if "exceptionDetails" in scan or not isinstance(info, list) or not info:
        return [], []
    marked = await cdp.send(
        "DOM.querySelectorAll",
        {"nodeId": root["root"]["nodeId"], "selector": f'[{GLYPH_MARK}="{token}"]'},
    )
    unmark = world.send(
        "Runtime.evaluate",
        {
            "expression": _GLYPH_UNMARK % (GLYPH_MARK, GLYPH_MARK),
            "contextId": context,
            "silent": True,
        },
    )
    nodes: list[int] = marked["nodeIds"]
    if len(nodes) != len(info):
        await unmark
        return [], []
    *answers, _ = await asyncio.gather(
        *(cdp.send("CSS.getPlatformFontsForNode", {"nodeId": n}) for n in nodes), unmark
    )
    findings = FontFindings(coverage)
    for item, answer in zip(info, answers, strict=True):
        findings.add(item, answer.get("fonts") or [])
    return list(findings.missing.values()), list(findings.fallbacks.values())


async def audit_page(
    page: Page, tab_cdp: CDPSession, *, glyph_limit: int
) -> tuple[list[AccessibilityProblem], list[GlyphProblem], list[GlyphProblem]]:
    """Accessibility findings, missing glyphs and font fallbacks of the page as it is now (axe-core
    and the font queries concurrently).

    `tab_cdp` is the tab's own session, the one `install_axe` was given, whose `AUDIT_WORLD` runs
    axe-core and the glyph scan; the font queries use a session of their own (they enable the
    DOM and CSS domains), detached afterwards.

    A protocol error while the page is still open (its scripts removed an element being asked
    about) ends the audit with what it has: the audit never fails a render.
    """
    accessibility: list[AccessibilityProblem] = []
    missing: list[GlyphProblem] = []
    fallbacks: list[GlyphProblem] = []
    cdp = await page.context.new_cdp_session(page)
    try:
        context = await _audit_world(tab_cdp)
        accessibility, (missing, fallbacks) = await asyncio.gather(
            run_axe(tab_cdp, context), check_fonts(cdp, tab_cdp, context, glyph_limit)
        )
    except PlaywrightError as exc:
        if page.is_closed():
            raise
        log.info("page audit stopped early: %s", (exc.message or str(exc)).splitlines()[0])
    finally:
        if not page.is_closed():
            await cdp.detach()
    return accessibility, missing, fallbacks
