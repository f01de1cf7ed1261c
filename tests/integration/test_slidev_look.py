"""A Slidev deck looks the way Slidev shows it: Slidev's own styles, layouts and canvas.

The compiled pages are opened in Chromium and their computed styles compared with what Slidev
53's own export computes for the same Markdown (measured on `bench/fidelity/slidev.md`): the
dark canvas #121212, a cover heading of 60 px canvas pixels (`text-6xl` of the default theme),
a two-column slide laid out from the top, the `end` layout's black slide, and a UnoCSS utility
class of the deck (`text-green-400`) applied.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import async_playwright

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_file import deck_from_markdown
from deckyard.decks.source.slidev_engine import slidev_available
from deckyard.render.renderer.browser.pool import find_chromium

pytestmark = pytest.mark.chromium


def test_slidev_is_installed() -> None:
    """scripts/setup installs vendor/js; without it every Slidev deck would lose its look."""
    assert slidev_available(), "vendor/js has no Slidev: run scripts/setup"


DECK = """---
theme: default
colorSchema: dark
title: Slidev look
---

# Cover title

Subtitle

---
layout: two-cols
---

# Left <mdi-check-circle class="text-green-400" />

::right::

# Right

---
layout: end
---

# Thanks
"""

_STYLES = """(sel) => {
  const e = document.querySelector(sel);
  const s = getComputedStyle(e);
  const r = e.getBoundingClientRect();
  return {font: parseFloat(s.fontSize), color: s.color, background: s.backgroundColor,
          top: r.top, height: r.height};
}"""


async def _styles(documents: list[str], width: int, height: int) -> list[dict[str, Any]]:
    settings = Settings.load()
    found: list[dict[str, Any]] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=find_chromium(settings, p.chromium.executable_path)
        )
        try:
            page = await browser.new_page(viewport={"width": width, "height": height})
            for document, selectors in zip(
                documents,
                (
                    (".slidev-slide-content", ".slidev-layout h1"),
                    (".col-left h1", ".col-left svg"),
                    (".slidev-layout.end", ".slidev-layout h1"),
                ),
                strict=True,
            ):
                await page.set_content(document)
                found.append({sel: await page.evaluate(_STYLES, sel) for sel in selectors})
        finally:
            await browser.close()
    return found


async def test_a_slidev_deck_gets_slidevs_own_theme_layouts_and_canvas() -> None:
    limits = DeckLimits.from_settings(Settings.load())
    deck = deck_from_markdown(DECK, "slides.md", {}, limits)
    assert not [w.message for w in deck.warnings if "Slidev" in w.message]
    pages = compile_deck(deck, limits)
    cover, cols, end = await _styles([p.document for p in pages], deck.width, deck.height)
    scale = deck.width / 980  # Slidev's canvas is 980 px wide, scaled to the slide
    canvas, heading = cover[".slidev-slide-content"], cover[".slidev-layout h1"]
    assert canvas["background"] == "rgb(18, 18, 18)"  # Slidev's bg-main, dark
    assert heading["font"] == 60 and heading["color"] == "rgb(255, 255, 255)"
    assert heading["height"] == pytest.approx(80 * scale, abs=1)  # text-6xl leading-20
    # two-cols lays its columns out from the top, as Slidev does (not centred)
    assert cols[".col-left h1"]["top"] == pytest.approx(40 * scale, abs=2)  # py-10
    assert cols[".col-left svg"]["color"] == "rgb(74, 222, 128)"  # the deck's text-green-400
    assert end[".slidev-layout.end"]["background"] == "rgb(0, 0, 0)"  # the end layout's bg-black
    assert end[".slidev-layout h1"]["color"] == "rgba(255, 255, 255, 0.85)"
