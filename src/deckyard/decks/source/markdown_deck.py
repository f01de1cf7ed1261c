"""Splits a one-file Markdown deck (Marp, Slidev or reveal.js conventions) into slides.

The deck's YAML front matter (markdown-it's front-matter plugin finds it) holds deck settings;
slides are separated by `---` lines (or reveal.js's `separator`/`verticalSeparator` patterns, or
Marp's `headingDivider`) outside code. A slide may start with its own front matter, by Slidev's
rule (`slidev_front.py`), whatever its keys; keys Deckyard does not use are one warning per
slide. A slide's `src:` imports the slides of another Markdown file beside it
(`slidev_imports.py`).
Each slide's directives are resolved as Marp does (inherited unless `_`-prefixed) and written into
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
from deckyard.decks.source.markdown_scan import is_utility_class, scan_unsupported, utility_classes
from deckyard.decks.source.slidev_front import (
    block_front_matter,
    slide_front_matter,
    without_scripts,
)
from deckyard.decks.source.slidev_imports import ImportReader, import_target, slide_numbers


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
    file: str | None = None
    """The imported file (`pages/x.md`) the line is in; None for the deck's own file."""

    def describe(self, file: str) -> str:
        """One readable line: `talk.md:12 (slide 3): message`."""
        where = f"{self.file or file}:{self.line}" + (
            f" (slide {self.slide})" if self.slide else ""
        )
        return f"{where}: {self.message}"


@dataclass
class ParsedSlide:
    """One slide: its number, its first line in the file, its text and resolved directives."""

    number: int
    first_line: int
    text: str
    directives: dict[str, Any]
    notes: list[str]
    file: str | None = None
    """The file a Slidev `src:` import took the slide from; None for the deck's own file."""
    front: dict[str, Any] = field(default_factory=dict)
    """The slide's own front matter as written (the first slide's: the deck's head matter)."""

    def page_text(self, file: str | None = None) -> str:
        """The slide as a self-contained Markdown page: its text, then its directives.

        With `file`, the directives also say where the slide starts (`talk.md:42`, or the
        imported file's line), so the compiler can name that line; an imported page, edited
        on its own later, goes without.
        """
        spot = {f"_{k}": v for k, v in self.directives.items() if v is not None}
        if file is not None:
            spot[f"_{SOURCE_DIRECTIVE}"] = f"{self.file or file}:{self.first_line}"
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
    """The deck's text cannot be read as a deck (bad front matter); `line` says where.

    `file` names an imported file (`src:`) the line is in; None for the deck's own file, and
    `missing_import` says the problem is an imported file that is not there.
    """

    def __init__(
        self, message: str, line: int, file: str | None = None, *, missing_import: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.file = file
        self.missing_import = missing_import


_SLIDEV_HINTS = frozenset(
    {
        "highlighter",
        "drawings",
        "transition",
        "mdc",
        "info",
        "layout",
        "aspectRatio",
        "canvasWidth",
        "colorSchema",
    }
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
        "colorSchema",
    }
)
_SLIDE_ONLY = frozenset({"hide", "disabled"})
_SLIDE_USED = LOCAL_DIRECTIVES | _SLIDE_ONLY | {"src", "level", "hideInToc"}
_FIRST_ONLY = frozenset({"layout", "background", "image"})
_DEFAULT_SEPARATOR = r"^---\s*$"
_REVEAL_VERTICAL = r"^--\s*$"
_HEADING = re.compile(r"^(#{1,6})\s")
_MAX_IMPORT_DEPTH = 8


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


@dataclass
class _Chunk:
    first: int
    lines: list[str]
    front: dict[str, Any]
    front_line: int = 0
    file: str | None = None
    problems: list[tuple[int, str]] = field(default_factory=list)


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
                used, slide_front, problem = 0, dict[str, Any](), None
                if convention is not Convention.REVEAL:
                    strict = convention is Convention.MARP
                    used, slide_front, problem = slide_front_matter(lines, i, code, strict=strict)
                chunk = _Chunk(offset + i + used + 1, [], slide_front)
                chunk.front_line = offset + i + 1 if slide_front else 0
                chunk.problems += [(offset + i + 1, problem)] if problem else []
                chunks.append(chunk)
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
    return [c for c in chunks if any(s.strip() for s in c.lines) or c.front or c.problems], warnings


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


def _headmatter(text: str, file: str | None) -> tuple[dict[str, Any], str, int]:
    """(front matter, body, first line of the body) of a Markdown file's `text`."""
    tokens = _front_matter_parser().parse(text)
    if tokens and tokens[0].type == "front_matter" and tokens[0].map:
        try:
            front = _yaml_mapping(tokens[0].content, 2, "the front matter")
        except MarkdownDeckError as exc:
            exc.file = file
            raise
        end = tokens[0].map[1]
        return front, "\n".join(text.split("\n")[end:]), end + 1
    return {}, text, 1


def _normalised(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _imported(
    chunk: _Chunk, read: ImportReader | None, convention: Convention, chain: tuple[str, ...]
) -> list[_Chunk]:
    """The chunks a slide's `src:` names, with the slide's other front matter over theirs."""
    src = str(chunk.front["src"])
    line = chunk.front_line or chunk.first
    try:
        path, spec = import_target(src, chunk.file)
    except ValueError as exc:
        raise MarkdownDeckError(f"src: {exc}", line, chunk.file, missing_import=True) from None
    if path in chain or len(chain) > _MAX_IMPORT_DEPTH:
        raise MarkdownDeckError(f"src: {src} imports itself", line, chunk.file)
    text = read(path) if read is not None else None
    if text is None:
        message = f"src: {src}: the file {path} is not there beside the deck"
        raise MarkdownDeckError(message, line, chunk.file, missing_import=True)
    front, body, offset = _headmatter(_normalised(text), path)
    chunks, _ = _split(body, offset, {}, convention)
    if front and chunks and chunks[0].first == offset:
        chunks[0].front = {**front, **chunks[0].front}
        chunks[0].front_line = chunks[0].front_line or 2
    elif front:
        chunks.insert(0, _Chunk(offset, [], front, 2))
    override = {k: v for k, v in chunk.front.items() if k != "src"}
    picked = [chunks[n - 1] for n in slide_numbers(spec, len(chunks))]
    if any(s.strip() for s in chunk.lines):
        note = f"the text of a slide with src: {src} is not shown; the imported slides are"
        chunk.problems.append((chunk.first, note))
    if picked:
        picked[0].problems[:0] = chunk.problems
    out: list[_Chunk] = []
    for sub in picked:
        sub.file = path
        sub.front = {**sub.front, **override}
        if "src" in sub.front:
            out += _imported(sub, read, convention, (*chain, path))
        else:
            out.append(sub)
    return out


def _slide_warnings(chunk: _Chunk, number: int, text: str) -> list[DeckWarning]:
    """What one slide's front matter and text hold that Deckyard does not carry over."""
    found = [DeckWarning(line, number, message, chunk.file) for line, message in chunk.problems]
    if chunk.front.get("hide") or chunk.front.get("disabled"):
        found.append(DeckWarning(chunk.first, number, "a hidden slide is shown", chunk.file))
    ignored = [k for k in chunk.front if k not in _SLIDE_USED]
    if ignored:
        names = ", ".join(repr(k) for k in ignored)
        message = f"slide front matter {names} has no effect in Deckyard; ignored"
        found.append(DeckWarning(chunk.front_line or chunk.first, number, message, chunk.file))
    slide_class = chunk.front.get("class")
    words = slide_class if isinstance(slide_class, list) else str(slide_class or "").split()
    utilities = [(chunk.front_line, str(w)) for w in words if is_utility_class(str(w))]
    utilities += [(chunk.first + line - 1, w) for line, w in utility_classes(text)]
    if utilities:
        names = ", ".join(dict.fromkeys(w for _, w in utilities))
        message = f"UnoCSS utility classes have no effect in Deckyard: {names}"
        found.append(DeckWarning(utilities[0][0], number, message, chunk.file))
    return found


def parse_markdown_deck(text: str, read: ImportReader | None = None) -> MarkdownDeck:
    """`text` read as a one-file deck; raises `MarkdownDeckError` for unreadable front matter.

    `read` gives the files Slidev slides import (`src:`); without it, or when it finds no
    file, such an import is a `MarkdownDeckError` naming its line.
    """
    text = _normalised(text)
    front, body, offset = _headmatter(text, None)
    convention = _convention(front, body)
    split, warnings = _split(body, offset, front, convention)
    chunks: list[_Chunk] = []
    for chunk in split:
        imports = "src" in chunk.front and convention is not Convention.MARP
        chunks += _imported(chunk, read, convention, ()) if imports else [chunk]
    _front_warnings(front, warnings)
    deck = {k: v for k, v in front.items() if k in _DECK_KEYS}
    first_only = _FIRST_ONLY if convention is not Convention.SLIDEV else LOCAL_DIRECTIVES
    inherited = {k: v for k, v in front.items() if k in LOCAL_DIRECTIVES - first_only}
    first_spot = {k: v for k, v in front.items() if k in first_only}
    first_spot.update({k[1:]: v for k, v in front.items() if k[1:] in LOCAL_DIRECTIVES})
    slides: list[ParsedSlide] = []
    for chunk in chunks:
        number = len(slides) + 1
        if convention is Convention.SLIDEV and not chunk.front:
            found = block_front_matter(chunk.lines)
            if found is not None:
                chunk.front, line = found
                chunk.front_line = chunk.first + line
        slide_text = "\n".join(chunk.lines)
        if convention is not Convention.REVEAL:
            slide_text, removed = without_scripts(slide_text)
            chunk.problems += [(chunk.first + line - 1, m) for line, m in removed]
        comments = split_comments(slide_text)
        deck.update(comments.global_)
        inherited.update(comments.local)
        own = {k: v for k, v in chunk.front.items() if k in LOCAL_DIRECTIVES}
        if number == 1:
            own = {**first_spot, **own}
        warnings += _slide_warnings(chunk, number, slide_text)
        reveal = _reveal_directives(comments.attributes, chunk.first, number, warnings)
        directives = {**inherited, **own, **reveal, **comments.spot}
        for line, message in comments.problems + scan_unsupported(slide_text):
            warnings.append(DeckWarning(chunk.first + line - 1, number, message, chunk.file))
        slide = ParsedSlide(number, chunk.first, slide_text, directives, comments.notes)
        slide.file = chunk.file
        slide.front = {**front, **chunk.front} if number == 1 else dict(chunk.front)
        slides.append(slide)
    warnings.sort(key=lambda w: (w.slide or 0, w.line))
    return MarkdownDeck(convention, front, deck, slides, warnings)
