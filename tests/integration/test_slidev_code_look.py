"""A Slidev deck's code blocks, math and `<Toc>` look as Slidev shows them, in Chromium.

Slidev's `code.css` gives a code block its grey box (`--slidev-code-background`, #f5f5f5 when
light), 12 px type and rounded corners, and picks each token's vitesse colour by colour schema;
a `$$ {1|3|all}` block shows its lines as a table; `<Toc>` lists the slide titles.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import async_playwright

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_file import deck_from_markdown
from deckyard.render.renderer.browser.pool import find_chromium

pytestmark = pytest.mark.chromium

DECK = """---
theme: default
colorSchema: {schema}
---

# Code

```ts {{2}}
// note
const answer = 42
```

---

# Math

Block
$$ {{1|all}}
\\begin{{aligned}}
a &= b \\\\
c &= d
\\end{{aligned}}
$$

---

# Contents

<Toc />
"""

_PROBE = """() => {
  const style = (sel) => {
    const e = document.querySelector(sel);
    return e && getComputedStyle(e);
  };
  const dim = style('span.line.slidev-code-dishonored');
  const pre = style('pre.slidev-code'), word = style('span.line:nth-child(2) > span');
  return {
    background: pre && pre.backgroundColor, font: pre && parseFloat(pre.fontSize),
    radius: pre && pre.borderTopLeftRadius, keyword: word && word.color,
    dimmed: dim && dim.opacity,
    rows: document.querySelectorAll('math mtr').length,
    text: document.body.innerText,
    toc: [...document.querySelectorAll('.slidev-toc li')].map((li) => li.innerText),
  };
}"""


async def _probe(schema: str) -> list[dict[str, Any]]:
    settings = Settings.load()
    limits = DeckLimits.from_settings(settings)
    deck = deck_from_markdown(DECK.format(schema=schema), "slides.md", {}, limits)
    pages = compile_deck(deck, limits)
    found: list[dict[str, Any]] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=find_chromium(settings, p.chromium.executable_path)
        )
        try:
            page = await browser.new_page(viewport={"width": deck.width, "height": deck.height})
            for compiled in pages:
                await page.set_content(compiled.document)
                found.append(await page.evaluate(_PROBE))
        finally:
            await browser.close()
    return found


async def test_a_code_block_math_and_toc_look_as_in_slidev() -> None:
    code, math, toc = await _probe("light")
    assert code["background"] == "rgb(245, 245, 245)"  # --slidev-code-background
    assert code["font"] == 12 and code["radius"] == "4px"
    assert code["keyword"] == "rgb(171, 89, 89)"  # vitesse-light's `const`
    assert code["dimmed"] == "0.3"  # {2}: line 1 is dimmed
    assert math["rows"] == 2 and "1|all" not in math["text"]
    assert toc["toc"] == ["Code", "Math", "Contents"]


async def test_a_dark_deck_takes_vitesse_darks_colours() -> None:
    code, _math, _toc = await _probe("dark")
    assert code["background"] == "rgb(27, 27, 27)"  # --slidev-code-background, dark
    assert code["keyword"] == "rgb(203, 118, 118)"  # vitesse-dark's `const`
