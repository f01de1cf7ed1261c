"""When each revealable element of a slide shows, by the rules of the tool the slide comes from.

A step is one press of "next" inside a slide; step 0 shows the slide as it opens, step K (the
slide's count) shows everything. Three tools mark steps, and each has its own rule:

- reveal.js: elements of class `fragment`, ordered as reveal.js's `Fragments.sort` orders
  them: the distinct `data-fragment-index` values first (equal indexes show together), then
  the fragments without one in document order; a fragment whose index is not a whole number
  never shows (reveal.js drops it too). Fragments written in a `data-markdown` section's
  Markdown (`<!-- .element: class="fragment" -->`) are counted from its text.
- Marp: the items of a fragmented list (`*` bullets, `1)` numbers) carry
  `data-marpit-fragment="N"`, N from 1 in order; one step each.
- Slidev (v0.48 and later): `<v-click>`, `v-click` (one click more than the previous relative
  one), `v-after` (with the previous one), `<v-clicks>` (each item of its list, or each child,
  one click), a value `+n`/`-n` (relative) or `n` (absolute: at click n, without moving the
  count), and `.hide`/`hide` (shown until that click, hidden from it). `every`, `depth`,
  ranges (`[2, 4]`) and the `clicks:` front matter are not read: such an element counts as one
  click more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bs4 import BeautifulSoup
from bs4.element import Tag

from deckyard.decks.compile.markdown import MARKER_TAG

_INDEX = re.compile(r"^\s*[+-]?\d+")
_FRAGMENT_CLASS = re.compile(r"""class\s*=\s*["'][^"']*\bfragment\b[^"']*["']""")
_FRAGMENT_INDEX = re.compile(r"""data-fragment-index\s*=\s*["']?([^"'\s>]*)""")
_ELEMENT_COMMENT = re.compile(r"<!--\s*\.(?:element|slide):(.*?)-->", re.DOTALL)
_HTML_TAG = re.compile(r"<[A-Za-z][^>]*>")
_CLICK_ATTRS = ("v-click", "v-click.hide", "v-after", "v-after.hide")
MARP_FRAGMENT = "data-marpit-fragment"


@dataclass(frozen=True)
class Timed:
    """One element that a step shows (or, with `hide`, hides): from step `at` on."""

    tag: Tag
    at: int
    hide: bool = False

    def shown_at(self, step: int) -> bool:
        """Whether the element is visible at `step`."""
        return step < self.at if self.hide else step >= self.at


def _reveal_index(value: str | None) -> int | None:
    """reveal.js's `parseInt(data-fragment-index)`: a group index, or -1 for one never shown."""
    if value is None:
        return None
    found = _INDEX.match(value)
    return int(found.group(0)) if found and int(found.group(0)) >= 0 else -1


def reveal_fragment_count(section: Tag) -> int:
    """How many fragment groups (steps) reveal.js makes of one slide's `<section>`."""
    indexes: list[int | None] = []
    for fragment in section.select(".fragment"):
        index = fragment.get("data-fragment-index")
        indexes.append(_reveal_index(None if index is None else str(index)))
    if section.has_attr("data-markdown"):
        template = section.find("script")
        text = str(template.string or "") if isinstance(template, Tag) else section.get_text()
        for chunk in [*_ELEMENT_COMMENT.findall(text), *_HTML_TAG.findall(text)]:
            if _FRAGMENT_CLASS.search(chunk):
                found = _FRAGMENT_INDEX.search(chunk)
                indexes.append(_reveal_index(found.group(1) if found else None))
    ordered = {i for i in indexes if i is not None and i >= 0}
    return len(ordered) + sum(1 for i in indexes if i is None)


def marp_timings(soup: BeautifulSoup) -> list[Timed]:
    """The items of a Marp slide's fragmented lists, each shown from its own step."""
    timed: list[Timed] = []
    for tag in soup.select(f"[{MARP_FRAGMENT}]"):
        value = str(tag.get(MARP_FRAGMENT, ""))
        if value.isdigit():
            timed.append(Timed(tag, int(value)))
    return timed


def _clicks_items(tag: Tag) -> list[Tag]:
    """What a `<v-clicks>` shows one click at a time: its list's items, else its children
    (the compiler's line markers are not content)."""
    children = [c for c in tag.children if isinstance(c, Tag) and c.name != MARKER_TAG]
    if len(children) == 1 and children[0].name in ("ul", "ol"):
        return [li for li in children[0].children if isinstance(li, Tag) and li.name == "li"]
    return children


def _click_value(tag: Tag) -> tuple[str, str | None, bool]:
    """(`click` or `after`, the value or None, hide) of a Slidev click element or directive."""
    if tag.name in ("v-click", "v-after"):
        value = tag.get("at")
        return tag.name[2:], str(value) if value is not None else None, tag.has_attr("hide")
    for attr in _CLICK_ATTRS:
        if tag.has_attr(attr):
            value = str(tag.get(attr) or "").strip().strip("'\"") or None
            return attr[2:].split(".")[0], value, attr.endswith(".hide")
    return "", None, False


def slidev_timings(soup: BeautifulSoup) -> list[Timed]:
    """Each Slidev click element of a rendered slide with the click it shows at."""
    timed: list[Timed] = []
    counter = 0
    for tag in soup.find_all(True):
        if not isinstance(tag, Tag):
            continue
        if tag.name == "v-clicks":
            for item in _clicks_items(tag):
                counter += 1
                timed.append(Timed(item, counter, tag.has_attr("hide")))
            continue
        kind, value, hide = _click_value(tag)
        if not kind:
            continue
        if value is None:
            at = counter + 1 if kind == "click" else counter
            counter = at
        elif re.fullmatch(r"[+-]\d+", value):
            at = max(counter + int(value), 0)
            counter = at
        elif value.isdigit():
            at = int(value)
        else:
            counter += 1
            at = counter
        timed.append(Timed(tag, at, hide))
    return timed


def step_count(timed: list[Timed]) -> int:
    """The slide's steps: the last step at which anything changes."""
    return max((t.at for t in timed), default=0)


def hide_until_shown(timed: list[Timed], step: int) -> None:
    """Give every element not visible at `step` `visibility: hidden`, so nothing moves."""
    for item in timed:
        if item.shown_at(step):
            continue
        style = str(item.tag.get("style") or "").strip()
        if style and not style.endswith(";"):
            style += ";"
        item.tag["style"] = f"{style} visibility: hidden !important;".strip()
