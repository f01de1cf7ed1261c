"""Slidev's `<Toc>`: the deck's slide titles as nested ordered lists, as `Toc.vue` draws them.

Slidev titles a slide by its front matter's `title` (or `name`), else its first heading
outside code; its level is the front matter's `level`, else that heading's depth. Each titled
slide goes into the tree under the last one of a lower level (`useTocTree.ts`); a slide with
`hideInToc` is left out with what is under it. `<Toc>` shows the levels from `minDepth` to
`maxDepth` (deeper than `minDepth` 1 only under the current slide, as Slidev does) in
`div.slidev-toc > ol.slidev-toc-list`, each title a link to its slide. The deck's titles are
gathered when the deck is read (`toc_entries`) and travel with the page that shows them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_HEADING = re.compile(r"^(#+) (.*)$", re.MULTILINE)
_CODE = re.compile(r"^```[\s\S]+?^```", re.MULTILINE)
_TOC = re.compile(r"<Toc\b(?P<attrs>[^>]*?)/?>(?:\s*</Toc>)?")
_FENCE = re.compile(r"^(`{3,}|~{3,})[\s\S]*?^\1", re.MULTILINE)
_ATTR = re.compile(r"""([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


@dataclass
class _Item:
    no: int
    title: str
    level: int
    hidden: bool
    children: list[_Item] = field(default_factory=list)


def slide_title(text: str, front: Mapping[str, Any]) -> tuple[str, int | None]:
    """A slide's title and level as Slidev finds them (`@slidev/parser`); "" when untitled."""
    title = front.get("title") or front.get("name")
    level: int | None = None
    if not title:
        found = _HEADING.search(_CODE.sub("", text))
        title = found.group(2).strip() if found else ""
        level = len(found.group(1)) if found else None
    if front.get("level"):
        try:
            level = int(front["level"])
        except (TypeError, ValueError):
            level = 1
    return str(title), level


def toc_entries(slides: Sequence[tuple[int, str, Mapping[str, Any]]]) -> list[list[Any]]:
    """`[number, title, level, hidden]` of each titled slide of `(number, text, front)`."""
    entries: list[list[Any]] = []
    for number, text, front in slides:
        title, level = slide_title(text, front)
        if title:
            entries.append([number, title, level or 0, bool(front.get("hideInToc"))])
    return entries


def _add(tree: list[_Item], item: _Item, level: int = 1) -> None:
    wanted = item.level or level
    if wanted > level and tree:
        _add(tree[-1].children, item, level + 1)
    else:
        tree.append(item)


def _tree(entries: Sequence[Sequence[Any]]) -> list[_Item]:
    tree: list[_Item] = []
    for no, title, level, hidden in entries:
        _add(tree, _Item(int(no), str(title), int(level), bool(hidden)))
    return tree


def _contains(item: _Item, no: int) -> bool:
    return item.no == no or any(_contains(child, no) for child in item.children)


def _depth(tree: list[_Item], current: int, low: float, high: float, level: int) -> list[_Item]:
    if level > high:
        return []
    if level < low:
        active = next((i for i in tree if _contains(i, current)), None)
        return _depth(active.children, current, low, high, level + 1) if active else []
    return [
        _Item(i.no, i.title, i.level, i.hidden, _depth(i.children, current, low, high, level + 1))
        for i in tree
    ]


def _number(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def _list(items: list[_Item], level: int, inline: Callable[[str], str], start: str) -> str:
    shown = [i for i in items if not i.hidden]
    if not shown:
        return ""
    begin = f' start="{html.escape(start)}"' if level == 1 else ""
    rows = "".join(
        f'<li class="slidev-toc-item"><a href="#/{i.no}">{inline(i.title)}</a>'
        f"{_list(i.children, level + 1, inline, start)}</li>"
        for i in shown
    )
    return f'<ol class="slidev-toc-list slidev-toc-list-level-{level}"{begin}>{rows}</ol>'


def render_toc(
    text: str, entries: Sequence[Sequence[Any]], current: int, inline: Callable[[str], str]
) -> str:
    """`text` with each `<Toc …/>` drawn from the deck's `entries` (`toc_entries`), on slide
    `current`; `inline` renders a title's Markdown."""

    def draw(found: re.Match[str]) -> str:
        attrs = {m.group(1): m.group(2) or m.group(3) or "" for m in _ATTR.finditer(found["attrs"])}
        low = _number(attrs.get("minDepth") or attrs.get("min-depth"), 1)
        high = _number(attrs.get("maxDepth") or attrs.get("max-depth"), float("inf"))
        columns = _number(attrs.get("columns"), 1)
        tree = _depth(_tree(entries), current, low, high, 1)
        start = attrs.get("start") or "1"
        listed = _list(tree, 1, inline, start)
        flags = " ".join(w for w in found["attrs"].split() if re.fullmatch(r"[\w-]+", w))
        classes = f"slidev-toc {html.escape(flags)}".strip()
        return f'<div class="{classes}" style="column-count:{columns:g}">{listed}</div>'

    parts: list[str] = []
    done = 0
    for fence in _FENCE.finditer(text):
        parts += [_TOC.sub(draw, text[done : fence.start()]), fence.group(0)]
        done = fence.end()
    return "".join([*parts, _TOC.sub(draw, text[done:])])


def uses_toc(text: str) -> bool:
    """Whether the slide `text` has a `<Toc>` outside its code blocks."""
    return _TOC.search(_FENCE.sub("", text)) is not None
