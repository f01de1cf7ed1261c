"""Slidev's icon tags (`<carbon-logo-github />`, `<mdi:account />`) as inline SVG.

Slidev resolves such a tag with unplugin-icons from an installed `@iconify-json/<set>` package.
`scripts/setup` installs two sets, `carbon` and `mdi` (`vendor/js/package.json`, pinned by its
lock file), and a tag of those sets becomes the icon's SVG at compile time, sized `1.2em` and
drawn in `currentColor` as Slidev draws it. A tag of another known Iconify set, or a name the
set does not have, is removed; the source scan warns about it with the slide and line. Without
the packages (a wheel install without the checkout) every icon tag is removed and warned about.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from markdown_it import MarkdownIt

ICON_SETS_DIR = (
    Path(__file__).resolve().parents[3] / "vendor" / "js" / "node_modules" / "@iconify-json"
)
VENDORED_SETS = ("carbon", "mdi")
KNOWN_SETS = frozenset(
    {
        *VENDORED_SETS,
        "akar-icons",
        "bi",
        "devicon",
        "emojione",
        "fa",
        "fa6-brands",
        "fa6-regular",
        "fa6-solid",
        "fluent",
        "heroicons",
        "ic",
        "icon-park",
        "iconoir",
        "la",
        "line-md",
        "logos",
        "lucide",
        "material-symbols",
        "mingcute",
        "noto",
        "octicon",
        "openmoji",
        "ph",
        "ri",
        "simple-icons",
        "skill-icons",
        "solar",
        "svg-spinners",
        "tabler",
        "twemoji",
        "uil",
        "uim",
        "vscode-icons",
    }
)
"""Iconify sets whose tags are read as icons; a tag of another prefix is left as HTML."""

ICON_TAG = re.compile(
    r"<(?P<tag>(?:i-)?[a-z][a-z0-9]*(?:[-:][a-z0-9]+)+)(?P<attrs>(?:\s+[^<>]*?)?)\s*"
    r"(?:/>|>\s*</(?P=tag)>)"
)
_CLASS_ATTR = re.compile(r"""\bclass\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_CODE_SPAN = re.compile(r"(`+)(?:.*?[^`])?\1(?!`)")


@dataclass(frozen=True)
class IconTag:
    """One icon tag: its Iconify set and name (`carbon`, `logo-github`) and its classes."""

    text: str
    icon_set: str
    name: str
    classes: str


def read_icon_tag(match: re.Match[str]) -> IconTag | None:
    """The icon an `ICON_TAG` match names, or None when its prefix is no known Iconify set."""
    tag = match.group("tag").removeprefix("i-")
    if ":" in tag:
        icon_set, _, name = tag.partition(":")
        found = (icon_set, name) if icon_set in KNOWN_SETS else None
    else:
        parts = tag.split("-")
        found = None
        for cut in range(len(parts) - 1, 0, -1):
            if "-".join(parts[:cut]) in KNOWN_SETS:
                found = ("-".join(parts[:cut]), "-".join(parts[cut:]))
                break
    if found is None:
        return None
    classes = _CLASS_ATTR.search(match.group("attrs") or "")
    words = (classes.group(1) or classes.group(2) or "") if classes else ""
    return IconTag(match.group(0), found[0], found[1], words)


@lru_cache(maxsize=1)
def _block_parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True})


@lru_cache(maxsize=len(VENDORED_SETS))
def _icon_set(name: str) -> dict[str, object] | None:
    if name not in VENDORED_SETS:
        return None
    try:
        loaded = json.loads((ICON_SETS_DIR / name / "icons.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def icon_svg(icon: IconTag, icon_class: str | None = None) -> str | None:
    """The SVG of `icon` (1.2em, `currentColor`), or None when its set or name is not here.

    With `icon_class` (Slidev's `slidev-icon`) the SVG is placed by that class, as Slidev
    places it, instead of Deckyard's inline alignment.
    """
    data = _icon_set(icon.icon_set)
    if data is None:
        return None
    icons = data.get("icons")
    aliases = data.get("aliases")
    name = icon.name
    if isinstance(aliases, dict) and isinstance(aliases.get(name), dict):
        alias = aliases[name]
        if set(alias) != {"parent"}:  # rotated or flipped aliases: none in the vendored sets
            return None
        name = str(alias["parent"])
    entry = icons.get(name) if isinstance(icons, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("body"), str):
        return None
    width = entry.get("width", data.get("width", 16))
    height = entry.get("height", data.get("height", 16))
    words = " ".join(w for w in (icon_class, icon.classes) if w)
    classes = f' class="{html.escape(words)}"' if words else ""
    style = "" if icon_class else ' style="vertical-align:-0.2em"'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="1.2em" height="1.2em" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(icon.name)}"'
        f"{classes}{style}>{entry['body']}</svg>"
    )


def _each_icon(text: str, replace: Callable[[IconTag, int], str]) -> str:
    """`text` with `replace(icon, line)` put for each icon tag outside code (lines from 1)."""
    code: set[int] = set()
    for token in _block_parser().parse(text):
        if token.map and token.type in ("fence", "code_block"):
            code.update(range(token.map[0], token.map[1]))
    out: list[str] = []
    for number, line in enumerate(text.split("\n")):
        if number in code or "<" not in line:
            out.append(line)
            continue

        def one(match: re.Match[str], number: int = number) -> str:
            icon = read_icon_tag(match)
            return match.group(0) if icon is None else replace(icon, number + 1)

        pieces: list[str] = []
        last = 0
        for span in _CODE_SPAN.finditer(line):
            pieces.append(ICON_TAG.sub(one, line[last : span.start()]))
            pieces.append(span.group(0))
            last = span.end()
        pieces.append(ICON_TAG.sub(one, line[last:]))
        out.append("".join(pieces))
    return "\n".join(out)


def find_icons(text: str) -> list[tuple[int, IconTag]]:
    """The icon tags of the Markdown `text` outside code, with their lines (from 1)."""
    found: list[tuple[int, IconTag]] = []

    def note(icon: IconTag, line: int) -> str:
        found.append((line, icon))
        return icon.text

    _each_icon(text, note)
    return found


def inline_icons(text: str, *, allow_html: bool, icon_class: str | None = None) -> str:
    """`text` (Markdown) with each icon tag outside code replaced by its SVG, or removed.

    Without raw HTML allowed the icon cannot be drawn, so the tag is removed as well.
    `icon_class` is `icon_svg`'s.
    """

    def svg(icon: IconTag, _line: int) -> str:
        return (icon_svg(icon, icon_class) if allow_html else None) or ""

    return _each_icon(text, svg)
