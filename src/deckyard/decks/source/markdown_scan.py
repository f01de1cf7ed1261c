"""Finds what a slide uses that Deckyard does not render, so it is a warning, never a silence.

Slidev's clicks (`v-click`), Vue components, `{{ … }}` interpolation, icons of sets that are not
installed (`decks/icons.py`) and UnoCSS utility classes, Marp's `<!--fit-->`, Mermaid and
PlantUML diagrams, code-line highlighting, math that latex2mathml cannot convert and emoji
shortcodes that the `emoji` package does not know. Lines are counted in the slide's text from
1; markdown-it's tokens give them, so code fences are not searched.
"""

from __future__ import annotations

import re
from functools import lru_cache

import emoji
import latex2mathml.converter
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

from deckyard.decks.compile.slide_math import math_interrupts_paragraphs, math_steps, mathml_latex
from deckyard.decks.compile.slidev_code import fence_info, fence_problems
from deckyard.decks.diagrams import mermaid_available
from deckyard.decks.icons import find_icons, icon_svg

_CLICK = re.compile(r"<v-clicks?\b|\sv-(click|after)\b", re.IGNORECASE)
_DIRECTIVES = {
    "motion": "Slidev motion (v-motion) is not animated; the element shows at rest",
    "mark": "Slidev's marks (v-mark) are not drawn; the text shows unmarked",
    "drag": "Slidev's draggable position (v-drag) is not applied; the element stays in the flow",
}
_DIRECTIVE = re.compile(r"\sv-(motion|mark|drag)\b", re.IGNORECASE)
_BUILTIN = re.compile(r"<(v-drag-arrow|v-drag|arrow|v-switch)\b", re.IGNORECASE)
_BUILTINS = {
    "v-drag": "Slidev's <v-drag> is not placed; its content stays in the flow",
    "v-drag-arrow": "Slidev's <v-drag-arrow> is not drawn",
    "arrow": "Slidev's <arrow> is not drawn",
    "v-switch": "Slidev's <v-switch> is not stepped; all its slots show",
}
_SNIPPET = re.compile(r"^<<<\s*(\S+)", re.MULTILINE)
_COMPONENT = re.compile(r"<([A-Z][A-Za-z0-9]*)\b")
_FIT = re.compile(r"<!--\s*fit\s*-->", re.IGNORECASE)
_ELEMENT = re.compile(r"<!--\s*\.element:")
_SLOT = re.compile(r"^::(?P<name>[\w-]+)::\s*$", re.MULTILINE)
_SHORTCODE = re.compile(r"(?<![\w:]):([a-z0-9_+-]*[a-z][a-z0-9_+-]*|[+-]1):(?![\w:])")
_DIAGRAMS = {"mermaid": "Mermaid", "plantuml": "PlantUML"}
_MUSTACHE = re.compile(r"\{\{.*?\}\}")
_SCRIPT = re.compile(r"^\s*<script\b[^>]*>", re.IGNORECASE)
_CLASS_ATTR = re.compile(r"""\bclass\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_VARIANT = re.compile(r"^(?:[\w-]+:)*!?-?")
_UTILITY = re.compile(
    r"^(?:[pm][xytblrse]?-(?:\d|auto|px|\[)\S*"
    r"|(?:[wh]|min-[wh]|max-[wh]|size|text|font|bg|border|b[tblrxy]?|rounded"
    r"|gap|space-[xy]|grid-cols|grid-rows|col|row|items|justify|content|self|place|leading|lh"
    r"|tracking|opacity|op|shadow|z|top|left|right|bottom|inset|translate|rotate|scale|order"
    r"|flex|basis|grow|shrink|decoration|aspect|object|overflow|c|color|fill|stroke|ring"
    r"|outline|blur|backdrop|transition|duration|ease|delay|animate|cursor|select|whitespace"
    r"|ws|break|line-clamp|columns)-\S+"
    r"|flex|grid|hidden|block|inline|inline-block|inline-flex|absolute|relative|fixed|sticky"
    r"|italic|underline|uppercase|lowercase|capitalize|truncate|container|shadow|rounded"
    r"|border|grow|shrink|contents|op|abs)$"
)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True}).enable("table").use(dollarmath_plugin)
    math_interrupts_paragraphs(md)
    return md


def _html_problems(content: str, line: int, *, inline: bool) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    if _CLICK.search(content):
        found.append((line, "Slidev clicks (v-click) are not animated; all content shows at once"))
    for name in dict.fromkeys(m.lower() for m in _DIRECTIVE.findall(content)):
        found.append((line, _DIRECTIVES[name]))
    for name in dict.fromkeys(m.lower() for m in _BUILTIN.findall(content)):
        found.append((line, _BUILTINS[name]))
    for name in dict.fromkeys(_COMPONENT.findall(content)):
        found.append((line, f"the Vue component <{name}> is not rendered; only its text shows"))
    if inline and _ELEMENT.search(content):
        found.append((line, "reveal.js `.element` attributes (fragments) are ignored"))
    if _FIT.search(content):
        found.append((line, "Marp's <!--fit--> is not supported; the heading keeps its size"))
    return found


def _shortcode_problems(content: str, line: int) -> list[tuple[int, str]]:
    """Emoji shortcodes in `content` that the `emoji` package does not know (left as text)."""
    return [
        (line, f"the emoji shortcode :{name}: is not known; it shows as text")
        for name in dict.fromkeys(_SHORTCODE.findall(content))
        if emoji.emojize(f":{name}:", language="alias") == f":{name}:"
    ]


def _math_problems(token: Token, line: int) -> list[tuple[int, str]]:
    latex, steps = math_steps(token.content)
    found: list[tuple[int, str]] = []
    if steps and token.type != "math_inline":
        said = f"math click steps ({{{steps}}}) are not stepped; every line shows"
        found.append((line, said))
    try:
        latex2mathml.converter.convert(mathml_latex(latex, display=False).strip())
    except Exception as exc:  # latex2mathml raises many exception types for bad input
        said = f"this math cannot be converted ({exc}); it is shown as LaTeX source"
        found.append((line, said))
    return found


def _fence_problems(token: Token, line: int) -> list[tuple[int, str]]:
    words = token.info.split()
    lang = fence_info(token.info).lang.lower() if words else ""
    if lang in _DIAGRAMS:
        if lang == "mermaid" and mermaid_available():
            found = []
        else:
            said = f"{_DIAGRAMS[lang]} diagrams are not rendered; the source shows as code"
            found = [(line, said)]
        if "{" in token.info:
            found.append((line, "the diagram's options ({…}) are ignored"))
        return found
    info = fence_info(token.info)
    found = [(line, message) for message in fence_problems(token.info)]
    if info.steps or info.line_numbers:
        found.insert(0, (line, "code-line highlighting ({…}) is ignored"))
    return found


def is_utility_class(word: str) -> bool:
    """Whether `word` reads as a UnoCSS (Tailwind-like) utility class."""
    return _UTILITY.match(_VARIANT.sub("", word)) is not None


def _classes(content: str) -> list[str]:
    return [
        word
        for match in _CLASS_ATTR.finditer(content)
        for word in (match.group(1) or match.group(2) or "").split()
    ]


def _mustache_problems(content: str, line: int) -> list[tuple[int, str]]:
    return [
        (line, f"Vue interpolation {found} is not evaluated; it shows as written")
        for found in dict.fromkeys(_MUSTACHE.findall(content))
    ]


def script_blocks(text: str) -> list[tuple[int, int]]:
    """0-based `(start, end)` line ranges of the `<script>` blocks of the slide `text`."""
    return [
        (token.map[0], token.map[1])
        for token in _parser().parse(text)
        if token.type == "html_block" and token.map and _SCRIPT.match(token.content)
    ]


def _icon_problems(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for line, icon in find_icons(text):
        if icon_svg(icon) is None:
            found.append(
                (line, f"the icon {icon.icon_set}:{icon.name} is not available; it is left out")
            )
    return found


def utility_classes(text: str) -> list[tuple[int, str]]:
    """`(line, class)` for each UnoCSS utility class (`p-3`, `text-xl`) the slide `text` uses.

    Deckyard does not run UnoCSS, so such a class has no effect; a deck's own CSS may still
    define it, which this cannot tell.
    """
    found: list[tuple[int, str]] = []
    for token in _parser().parse(text):
        line = token.map[0] + 1 if token.map else 1
        if token.type == "html_block":
            found += [(line, w) for w in _classes(token.content)]
        for child in token.children or []:
            if child.type == "html_inline":
                found += [(line, w) for w in _classes(child.content)]
            elif child.type in ("softbreak", "hardbreak"):
                line += 1
    return [(line, w) for line, w in found if is_utility_class(w)]


def scan_unsupported(text: str) -> list[tuple[int, str]]:
    """`(line, message)` for each construct of the slide `text` that is not rendered as written."""
    found: list[tuple[int, str]] = _icon_problems(text)
    for token in _parser().parse(text):
        line = token.map[0] + 1 if token.map else 1
        if token.type == "fence":
            found.extend(_fence_problems(token, line))
        elif token.type == "html_block":
            found.extend(_html_problems(token.content, line, inline=False))
            found.extend(_mustache_problems(token.content, line))
        elif token.type.startswith("math_block"):
            found.extend(_math_problems(token, line))
        elif token.type == "inline":
            for snippet in _SNIPPET.finditer(token.content):
                at = line + token.content.count("\n", 0, snippet.start())
                said = f"the code snippet import (<<< {snippet.group(1)}) is not read; "
                said += "it shows as text"
                found.append((at, said))
            for child in token.children or []:
                if child.type == "html_inline":
                    found.extend(_html_problems(child.content, line, inline=True))
                elif child.type.startswith("math_inline"):
                    found.extend(_math_problems(child, line))
                elif child.type == "text":
                    found.extend(_shortcode_problems(child.content, line))
                    found.extend(_mustache_problems(child.content, line))
                elif child.type in ("softbreak", "hardbreak"):
                    line += 1
    for match in _SLOT.finditer(text):
        if match.group("name") not in ("left", "right", "default"):
            line = text.count("\n", 0, match.start()) + 1
            found.append((line, f"the slot ::{match.group('name')}:: is shown in place"))
    return found
