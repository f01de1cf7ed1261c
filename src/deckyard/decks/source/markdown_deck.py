"""Splits a one-file Markdown deck (Marp, Slidev or reveal.js conventions) into slides.

The deck's YAML front matter (markdown-it's front-matter plugin finds it) holds deck settings;
slides are separated by `---` lines (or reveal.js's `separator`/`verticalSeparator` patterns, or
Marp's `headingDivider`) outside code; a Slidev slide may start with its own front matter. Each
slide's directives are resolved as Marp does (inherited unless `_`-prefixed) and written into
the slide's page text as one trailing comment, so a page stays self-contained: the renderer
(`slide_markdown.py`) needs nothing but the page text. What is not carried over is a
`DeckWarning` naming the slide and the line of the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

import yaml
from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin

from deckyard.decks.source.markdown_directives import (
    LOCAL_DIRECTIVES,
    SOURCE_DIRECTIVE,
    attribute_directives,
    loose_yaml,
    split_comments,
)
from deckyard.decks.source.markdown_scan import scan_unsupported


class Convention(StrEnum):
    """Which tool's conventions a Markdown deck follows, as far as its text tells."""

    MARP = "marp"
    SLIDEV = "slidev"
    REVEAL = "reveal"
    PLAIN = "plain"


@dataclass(frozen=True)
class DeckWarning:
    """Something in the deck that Deckyard does not carry over, with where it is."""

    line: int
    slide: int | None
    message: str

    def describe(self, file: str) -> str:
        """One readable line: `talk.md:12 (slide 3): message`."""
        where = f"{file}:{self.line}" + (f" (slide {self.slide})" if self.slide else "")
        return f"{where}: {self.message}"


@dataclass
class ParsedSlide:
    """One slide: its number, its first line in the file, its text and resolved directives."""

    number: int
    first_line: int
    text: str
    directives: dict[str, Any]
    notes: list[str]

    def page_text(self, file: str | None = None) -> str:
        """The slide as a self-contained Markdown page: its text, then its directives.

        With `file`, the directives also say where the slide starts (`talk.md:42`), so the
        compiler can name that line; an imported page, edited on its own later, goes without.
        """
        spot = {f"_{k}": v for k, v in self.directives.items() if v is not None}
        if file is not None:
            spot[f"_{SOURCE_DIRECTIVE}"] = f"{file}:{self.first_line}"
        if not spot:
            return self.text
        encoded = json.dumps(spot, ensure_ascii=False).replace("-->", "--\\u003e")
        return f"{self.text.rstrip()}\n\n<!-- {encoded} -->\n"


@dataclass
class MarkdownDeck:
    """A parsed one-file deck: deck settings, slides in order, and what was not carried over."""

    convention: Convention
    front_matter: dict[str, Any]
    deck: dict[str, Any]
    slides: list[ParsedSlide]
    warnings: list[DeckWarning] = field(default_factory=list)


class MarkdownDeckError(ValueError):
    """The deck's text cannot be read as a deck (bad front matter); `line` says where."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


_SLIDEV_KEYS = frozenset(
    {
        "layout",
        "class",
        "background",
        "image",
        "transition",
        "clicks",
        "hideInToc",
        "level",
        "title",
        "hide",
        "disabled",
        "zoom",
        "preload",
        "src",
        "routeAlias",
        "backgroundColor",
        "color",
        "paginate",
        "header",
        "footer",
    }
)
_SLIDEV_HINTS = frozenset(
    {"highlighter", "drawings", "transition", "mdc", "info", "layout", "aspectRatio", "canvasWidth"}
)
_REVEAL_HINTS = frozenset({"revealOptions", "separator", "verticalSeparator", "notesSeparator"})
_DECK_KEYS = frozenset(
    {
        "marp",
        "theme",
        "title",
        "lang",
        "size",
        "style",
        "headingDivider",
        "math",
        "separator",
        "verticalSeparator",
        "notesSeparator",
        "aspectRatio",
        "canvasWidth",
        "revealOptions",
        "width",
        "height",
        "description",
        "author",
        "keywords",
        "url",
        "info",
    }
)
_SLIDE_ONLY = frozenset({"hide", "disabled"})
_FIRST_ONLY = frozenset({"layout", "background", "image"})
_DEFAULT_SEPARATOR = r"^---\s*$"
_REVEAL_VERTICAL = r"^--\s*$"
_SLIDEV_FM_LINE = re.compile(r"^---\s*$")
_HEADING = re.compile(r"^(#{1,6})\s")


@lru_cache(maxsize=1)
def _front_matter_parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).use(front_matter_plugin)


def _yaml_mapping(text: str, line: int, what: str) -> dict[str, Any]:
    try:
        loaded = loose_yaml(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = line + (mark.line if mark is not None else 0)
        raise MarkdownDeckError(f"{what} is not valid YAML: {exc}", at) from None
    if not isinstance(loaded, dict):
        raise MarkdownDeckError(f"{what} must be a YAML mapping of settings", line)
    return {str(k): v for k, v in loaded.items()}


def _reveal_pattern(value: Any) -> re.Pattern[str] | None:
    """reveal.js separators are regexes over the text (`^\\r?\\n---\\r?\\n$`); ours are per line."""
    if not isinstance(value, str) or not value:
        return None
    pattern = value
    for newline in (r"\r?\n", r"\n", r"\r", "\r?", "\n", "\r"):
        pattern = pattern.replace(newline, "")
    try:
        return re.compile(pattern if pattern.startswith("^") else "^" + re.escape(pattern) + "$")
    except re.error:
        return re.compile("^" + re.escape(value) + r"\s*$")


def _convention(front: dict[str, Any], body: str) -> Convention:
    if front.get("marp") is True:
        return Convention.MARP
    if _REVEAL_HINTS & front.keys() or re.search(r"^\s*Notes?:", body, re.M | re.I):
        return Convention.REVEAL
    if _SLIDEV_HINTS & front.keys() or "<v-click" in body or "::right::" in body:
        return Convention.SLIDEV
    if re.search(r"<!--\s*_?(class|paginate|header|footer|backgroundColor)\s*:", body):
        return Convention.MARP
    return Convention.PLAIN


def _code_lines(body: str) -> set[int]:
    """0-based lines of `body` inside code fences and indented code."""
    inside: set[int] = set()
    for token in _front_matter_parser().parse(body):
        if token.map and token.type in ("fence", "code_block"):
            inside.update(range(token.map[0], token.map[1]))
    return inside


def _slidev_front_matter(
    lines: list[str], start: int, code: set[int]
) -> tuple[int, dict[str, Any]]:
    """Per-slide front matter right after the separator at `start`: (lines used, mapping)."""
    for end in range(start + 1, min(len(lines), start + 40)):
        if end in code:
            return 0, {}
        if _SLIDEV_FM_LINE.match(lines[end]):
            chunk = "\n".join(lines[start + 1 : end])
            try:
                loaded = yaml.safe_load(chunk) if chunk.strip() else None
            except yaml.YAMLError:
                return 0, {}
            if isinstance(loaded, dict) and _SLIDEV_KEYS & {str(k) for k in loaded}:
                return end - start, {str(k): v for k, v in loaded.items()}
            return 0, {}
    return 0, {}


@dataclass
class _Chunk:
    first: int
    lines: list[str]
    front: dict[str, Any]


def _split(
    body: str, offset: int, front: dict[str, Any], convention: Convention
) -> tuple[list[_Chunk], list[DeckWarning]]:
    lines = body.split("\n")
    code = _code_lines(body)
    separator = _reveal_pattern(front.get("separator")) or re.compile(_DEFAULT_SEPARATOR)
    vertical = _reveal_pattern(front.get("verticalSeparator"))
    if vertical is None and convention is Convention.REVEAL:
        vertical = re.compile(_REVEAL_VERTICAL)
    divider = front.get("headingDivider")
    level = divider if isinstance(divider, int) and not isinstance(divider, bool) else 0
    chunks = [_Chunk(offset, [], {})]
    warnings: list[DeckWarning] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i not in code:
            is_vertical = vertical is not None and vertical.match(line)
            if separator.match(line) or is_vertical:
                used, slide_front = 0, dict[str, Any]()
                if convention is not Convention.REVEAL:
                    used, slide_front = _slidev_front_matter(lines, i, code)
                chunks.append(_Chunk(offset + i + used + 1, [], slide_front))
                if is_vertical:
                    warnings.append(
                        DeckWarning(offset + i, len(chunks), "vertical slides are shown in order")
                    )
                i += used + 1
                continue
            heading = _HEADING.match(line)
            if (
                level
                and heading
                and len(heading.group(1)) <= level
                and any(s.strip() for s in chunks[-1].lines)
            ):
                chunks.append(_Chunk(offset + i, [], {}))
        chunks[-1].lines.append(line)
        i += 1
    return [c for c in chunks if any(s.strip() for s in c.lines) or c.front], warnings


def _reveal_directives(
    attributes: dict[str, str], line: int, number: int, warnings: list[DeckWarning]
) -> dict[str, Any]:
    out, ignored = attribute_directives(attributes)
    for name in ignored:
        warnings.append(DeckWarning(line, number, f"slide attribute {name!r} is ignored"))
    return out


def _front_warnings(front: dict[str, Any], warnings: list[DeckWarning]) -> None:
    used = _DECK_KEYS | LOCAL_DIRECTIVES | {f"_{k}" for k in LOCAL_DIRECTIVES}
    for key in front:
        if key not in used:
            warnings.append(DeckWarning(1, None, f"front matter {key!r} has no effect in Deckyard"))


def parse_markdown_deck(text: str) -> MarkdownDeck:
    """`text` read as a one-file deck; raises `MarkdownDeckError` for unreadable front matter."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    front: dict[str, Any] = {}
    body, offset = text, 1
    tokens = _front_matter_parser().parse(text)
    if tokens and tokens[0].type == "front_matter" and tokens[0].map:
        front = _yaml_mapping(tokens[0].content, 2, "the front matter")
        end = tokens[0].map[1]
        body = "\n".join(text.split("\n")[end:])
        offset = end + 1
    convention = _convention(front, body)
    chunks, warnings = _split(body, offset, front, convention)
    _front_warnings(front, warnings)
    deck = {k: v for k, v in front.items() if k in _DECK_KEYS}
    first_only = _FIRST_ONLY if convention is not Convention.SLIDEV else LOCAL_DIRECTIVES
    inherited = {k: v for k, v in front.items() if k in LOCAL_DIRECTIVES - first_only}
    first_spot = {k: v for k, v in front.items() if k in first_only}
    first_spot.update({k[1:]: v for k, v in front.items() if k[1:] in LOCAL_DIRECTIVES})
    slides: list[ParsedSlide] = []
    for chunk in chunks:
        number = len(slides) + 1
        slide_text = "\n".join(chunk.lines)
        comments = split_comments(slide_text)
        deck.update(comments.global_)
        inherited.update(comments.local)
        own = {k: v for k, v in chunk.front.items() if k in LOCAL_DIRECTIVES}
        if number == 1:
            own = {**first_spot, **own}
        if chunk.front.get("hide") or chunk.front.get("disabled"):
            warnings.append(DeckWarning(chunk.first, number, "a hidden slide is shown"))
        for key in chunk.front.keys() - LOCAL_DIRECTIVES - _SLIDE_ONLY:
            warnings.append(
                DeckWarning(chunk.first, number, f"slide setting {key!r} has no effect")
            )
        reveal = _reveal_directives(comments.attributes, chunk.first, number, warnings)
        directives = {**inherited, **own, **reveal, **comments.spot}
        for line, message in comments.problems + scan_unsupported(slide_text):
            warnings.append(DeckWarning(chunk.first + line - 1, number, message))
        slides.append(ParsedSlide(number, chunk.first, slide_text, directives, comments.notes))
    warnings.sort(key=lambda w: w.line)
    return MarkdownDeck(convention, front, deck, slides, warnings)
