"""A Slidev deck's code, math and `<Toc>` come out as Slidev draws them, or are warned about."""

from __future__ import annotations

import json
import re

from bs4 import BeautifulSoup

from deckyard.decks.compile.slide_markdown import render_slide
from deckyard.decks.compile.slidev_code import code_block, fence_info, fence_problems
from deckyard.decks.compile.slidev_toc import render_toc, toc_entries
from deckyard.decks.source.markdown_deck import parse_markdown_deck
from deckyard.decks.source.markdown_directives import SLIDEV_DIRECTIVE

CANVAS = {"width": 980, "height": 551.25, "scale": 1, "dark": False}


def _slidev_html(text: str, **canvas: object) -> BeautifulSoup:
    page = f'{text}\n\n<!-- {{"_{SLIDEV_DIRECTIVE}": {json.dumps({**CANVAS, **canvas})}}} -->\n'
    return BeautifulSoup(render_slide(page, allow_html=True, extensions=()), "html.parser")


def test_the_info_string_extras_do_not_hide_the_language() -> None:
    info = fence_info("ts [a.ts] {all|2|3-4} twoslash")
    assert (info.lang, info.title, info.steps, info.twoslash) == (
        "ts",
        "a.ts",
        ["all", "2", "3-4"],
        True,
    )
    assert fence_info("ts {monaco-run}").monaco == "monaco-run"
    assert fence_info("ts{2,3}").steps == ["2,3"]
    assert fence_info("md magic-move {lines: true}").magic_move
    assert fence_info("md magic-move {lines: true}").line_numbers


def test_a_code_block_has_slidevs_markup_and_vitesse_colours() -> None:
    soup = _slidev_html("# Code\n\n```ts {2}\n// note\nconst a = 'x'\n```\n")
    wrapper = soup.select_one("div.slidev-code-wrapper")
    assert wrapper is not None
    pre = wrapper.select_one("pre.shiki.slidev-code")
    assert pre is not None and pre.select_one("code.language-ts") is not None
    lines = pre.select("span.line")
    assert [line.get_text() for line in lines] == ["// note", "const a = 'x'"]
    assert "slidev-code-dishonored" in lines[0]["class"]  # {2}: the other lines are dimmed
    assert "slidev-code-highlighted" in lines[1]["class"]
    styles = {s.get_text(): s.get("style", "") for s in pre.select("span.line > span")}
    assert styles["const"] == "--shiki-light:#ab5959;--shiki-dark:#cb7676"  # vitesse's storage
    assert styles["'x'"] == "--shiki-light:#b56959;--shiki-dark:#c98a7d"  # vitesse's string
    assert "--shiki-light:#a0ada0" in styles["// note"]


def test_click_steps_show_the_last_step_and_a_title_bar_shows_the_file_name() -> None:
    block = code_block("a\nb\nc\n", fence_info("py [x.py] {1|2,3}"))
    soup = BeautifulSoup(block, "html.parser")
    title = soup.select_one(".slidev-code-block-title")
    assert title is not None and title.get_text() == "x.py"
    states = [line["class"][1] for line in soup.select("span.line")]
    assert states == [
        "slidev-code-dishonored",
        "slidev-code-highlighted",
        "slidev-code-highlighted",
    ]


def test_magic_move_shows_its_last_step_with_line_numbers() -> None:
    inner = "```ts {*|2}\nconst first = 1\n```\n\n```js\nlet last = 2\n```\n"
    soup = BeautifulSoup(
        code_block(inner, fence_info("md magic-move {lines: true}")), "html.parser"
    )
    wrapper = soup.select_one("div.slidev-code-wrapper")
    assert wrapper is not None and "slidev-code-line-numbers" in wrapper["class"]
    assert soup.select_one("code.language-js") is not None
    assert soup.get_text().strip() == "let last = 2"


def test_what_has_no_static_form_is_named() -> None:
    assert fence_problems("ts {monaco}") == [
        "the Monaco editor ({monaco}) is not run; the code shows as a static block"
    ]
    assert fence_problems("ts twoslash") == [
        "twoslash type hovers and errors are not shown; the code shows highlighted"
    ]
    assert fence_problems("ts {2,3}") == []
    assert fence_problems("ts {1|3}") == [
        "code-line highlighting steps ({1|3}) are not stepped; the block shows its last step"
    ]


def test_math_click_steps_are_dropped_and_aligned_lines_are_a_table() -> None:
    text = (
        "# Math\n\nBlock\n$$ {1|all}\n\\begin{aligned}\na &= b \\\\\nc &= d\n\\end{aligned}\n$$\n"
    )
    soup = _slidev_html(text)
    assert "1|all" not in soup.get_text().replace(" ", "")
    table = soup.select_one("div.math.block math mtable")
    assert table is not None and len(table.find_all("mtr")) == 2
    assert soup.select_one("p") is not None and soup.select_one("p").get_text() == "Block"
    cell = table.find("mtd")
    assert cell is not None and "text-align: right" in str(cell.get("style"))


def test_the_source_scan_names_each_slide_and_line() -> None:
    text = (
        "---\ntheme: default\n---\n\n# One\n\n```ts {monaco}\nx\n```\n\n"
        '---\n\n# Two\n\nBlock\n$$ {1|2}\nx\n$$\n\n<v-drag pos="1,2,3,4">\nMe\n</v-drag>\n\n'
        "<<< @/snippets/a.ts\n\n<span v-mark.red>marked</span>\n"
    )
    found = [(w.line, w.slide, w.message) for w in parse_markdown_deck(text).warnings]
    assert (
        7,
        1,
        "the Monaco editor ({monaco}) is not run; the code shows as a static block",
    ) in found
    assert (16, 2, "math click steps ({1|2}) are not stepped; every line shows") in found
    assert (20, 2, "Slidev's <v-drag> is not placed; its content stays in the flow") in found
    said = "the code snippet import (<<< @/snippets/a.ts) is not read; it shows as text"
    assert (24, 2, said) in found
    assert (26, 2, "Slidev's marks (v-mark) are not drawn; the text shows unmarked") in found
    assert not [m for _, _, m in found if "v-click" in m]


TOC_DECK = """---
theme: default
title: Deck
---

# Cover

---

# Part A

```md
# not a title
```

---
level: 2
---

# Detail

---
hideInToc: true
---

# Hidden

---

<Toc maxDepth="1" />

```html
<Toc />
```
"""


def test_toc_lists_the_titles_as_slidev_nests_them() -> None:
    deck = parse_markdown_deck(TOC_DECK)
    entries = toc_entries([(s.number, s.text, s.front) for s in deck.slides])
    assert [e[:3] for e in entries] == [
        [1, "Deck", 0],
        [2, "Part A", 1],
        [3, "Detail", 2],
        [4, "Hidden", 1],
    ]
    shown = render_toc(deck.slides[4].text, entries, 5, lambda title: title)
    soup = BeautifulSoup(shown, "html.parser")
    top = soup.select("div.slidev-toc > ol.slidev-toc-list-level-1 > li")
    assert [li.get_text() for li in top] == ["Deck", "Part A"]  # maxDepth 1; hideInToc left out
    assert "<Toc />" in shown  # the one in the code block stays code
    nested = BeautifulSoup(render_toc("<Toc />", entries, 5, str), "html.parser")
    assert [li.get_text() for li in nested.select("ol.slidev-toc-list-level-2 > li")] == ["Detail"]
    assert not [w for w in deck.warnings if re.search("'level'|'hideInToc'", w.message)]
