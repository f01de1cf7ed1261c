"""Builds a `DeckSource` from a one-file Markdown deck and the files beside it.

The Markdown file plays the part of `deck.toml` plus `pages/`: each slide becomes a Markdown
page (`slide-01`, `slide-02`, …) carrying its resolved directives, and the files under
`assets/` next to it are the deck's assets, as in a folder deck. The deck's theme is a built-in
(`theme: dark`; another tool's theme name maps to the closest one, with a warning) or a CSS file
of the deck (`theme: theme.css`), plus Marp's `style` directive. What is not carried over is in
`DeckSource.warnings`, each naming the file, the slide and the line. A Marp deck is the
exception: Marp's own engine renders it, one HTML page per slide (`marp_deck.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import assemble_deck, decode_text, parse_manifest
from deckyard.decks.source.deck_source import (
    DEFAULT_SLIDE_HEIGHT,
    DEFAULT_SLIDE_WIDTH,
    LANG_PATTERN,
    DeckSource,
    PageKind,
    PageSource,
    SourceWarning,
)
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_deck import (
    Convention,
    MarkdownDeck,
    MarkdownDeckError,
    parse_markdown_deck,
)
from deckyard.decks.source.marp_deck import marp_pages
from deckyard.decks.source.slidev_deck import SlidevLook, honoured, slidev_look
from deckyard.decks.source.slidev_engine import SlidevUnavailable
from deckyard.decks.source.slidev_imports import ImportReader
from deckyard.decks.source.theme_names import builtin_name
from deckyard.decks.source.unclosed import unclosed_blocks

MARKDOWN_SUFFIXES = (".md", ".markdown")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_TOOLS = {Convention.MARP: "Marp", Convention.SLIDEV: "Slidev", Convention.REVEAL: "reveal.js"}
_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*[:/x]\s*(\d+(?:\.\d+)?)\s*$")


def is_markdown_file(name: str) -> bool:
    """Whether `name` is a one-file Markdown deck by its extension."""
    return name.lower().endswith(MARKDOWN_SUFFIXES)


def _title(deck: MarkdownDeck, filename: str) -> str:
    title = deck.deck.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()[:300]
    for slide in deck.slides[:1]:
        found = _HEADING.search(slide.text)
        if found:
            return re.sub(r"<!--.*?-->", "", found.group(1)).strip()[:300] or filename
    stem = filename.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return stem or "Deck"


def _ratio(value: Any) -> Fraction | None:
    match = _RATIO.match(str(value)) if value is not None else None
    if match is None:
        return None
    width, height = Fraction(match.group(1)), Fraction(match.group(2))
    return width / height if width > 0 and height > 0 else None


def _given_size(
    settings: Mapping[str, Any], where: str, filename: str, warnings: list[SourceWarning]
) -> dict[str, int] | None:
    """`width` and `height` of `settings`; one of them alone keeps 16:9 and says so."""
    width, height = settings.get("width"), settings.get("height")
    width = width if isinstance(width, int) and not isinstance(width, bool) else None
    height = height if isinstance(height, int) and not isinstance(height, bool) else None
    if width is not None and height is not None:
        return {"width": width, "height": height}
    if width is None and height is None:
        return None
    if width is not None:
        height = max(16, round(width * DEFAULT_SLIDE_HEIGHT / DEFAULT_SLIDE_WIDTH))
        said = f"gives only width: {width}; height {height} keeps"
    else:
        assert height is not None
        width = max(16, round(height * DEFAULT_SLIDE_WIDTH / DEFAULT_SLIDE_HEIGHT))
        said = f"gives only height: {height}; width {width} keeps"
    message = f"{where} {said} the 16:9 aspect ratio; give both to choose another"
    warnings.append(SourceWarning(file=filename, line=1, message=message))
    return {"width": width, "height": height}


def _size(deck: MarkdownDeck, filename: str, warnings: list[SourceWarning]) -> dict[str, int]:
    """Slide size from Marp's `size`, Slidev's `aspectRatio`/`canvasWidth`, reveal.js's options."""
    options = deck.deck.get("revealOptions")
    if isinstance(options, dict):
        found = _given_size(options, "revealOptions", filename, warnings)
        if found is not None:
            return found
    found = _given_size(deck.deck, "the front matter", filename, warnings)
    if found is not None:
        return found
    ratio = _ratio(deck.deck.get("size")) or _ratio(deck.deck.get("aspectRatio"))
    canvas = deck.deck.get("canvasWidth")
    if ratio is None:
        return {"width": DEFAULT_SLIDE_WIDTH, "height": DEFAULT_SLIDE_HEIGHT}
    if isinstance(canvas, int) and canvas > 0:
        return {"width": canvas, "height": round(canvas / ratio)}
    if ratio >= Fraction(DEFAULT_SLIDE_WIDTH, DEFAULT_SLIDE_HEIGHT):
        return {"width": DEFAULT_SLIDE_WIDTH, "height": round(DEFAULT_SLIDE_WIDTH / ratio)}
    return {"width": round(DEFAULT_SLIDE_HEIGHT * ratio), "height": DEFAULT_SLIDE_HEIGHT}


def _theme(
    deck: MarkdownDeck, filename: str, files: Mapping[str, bytes], warnings: list[SourceWarning]
) -> tuple[str | None, str]:
    """(theme file path, inline theme CSS) for the deck's `theme` and `style` settings.

    Slidev's `colorSchema: dark` picks the built-in `dark` theme, whatever theme it names.
    """
    name = deck.deck.get("theme")
    style = deck.deck.get("style")
    dark = str(deck.deck.get("colorSchema", "")).strip().lower() == "dark"
    path: str | None = None
    css = ""
    if dark and not (isinstance(name, str) and name.strip().lower().endswith(".css")):
        css = '@import "dark";\n'
        if isinstance(name, str) and name.strip() and name.strip().lower() != "dark":
            tool = _TOOLS.get(deck.convention, "the deck")
            said = f"{tool}'s theme {name.strip()!r} is shown with Deckyard's built-in 'dark' theme"
            warnings.append(SourceWarning(file=filename, line=1, message=said))
    elif isinstance(name, str) and name.strip():
        if dark:
            said = (
                f"colorSchema: dark has no effect; the theme file {name.strip()} sets the colours"
            )
            warnings.append(SourceWarning(file=filename, line=1, message=said))
        wanted = name.strip().removeprefix("./")
        if wanted.lower().endswith(".css") and wanted in files:
            path = wanted
        else:
            builtin, note = builtin_name(wanted, _TOOLS.get(deck.convention))
            css = f'@import "{builtin}";\n'
            if note:
                warnings.append(SourceWarning(file=filename, line=1, message=note))
    elif deck.slides:
        css = '@import "default";\n'
    if isinstance(style, str) and style.strip():
        if path is not None:
            css = decode_text(files[path], path) + "\n"
            path = None
        css += style
    return path, css


def _slidev(
    deck: MarkdownDeck,
    filename: str,
    size: dict[str, int],
    limits: DeckLimits,
    warnings: list[SourceWarning],
) -> SlidevLook | None:
    """Slidev's own look for a Slidev deck (`slidev_deck.py`); None for another deck, or
    when Slidev's packages cannot build it (a warning says why)."""
    if deck.convention is not Convention.SLIDEV:
        return None
    try:
        return slidev_look(deck, filename, size, timeout=limits.marp_timeout_seconds)
    except SlidevUnavailable as exc:
        said = f"Slidev's own styles are not used ({exc}); the slides get Deckyard's theme"
        warnings.append(SourceWarning(file=filename, line=1, message=said))
        return None


def markdown_theme_files(text: str) -> list[str]:
    """The CSS file a Markdown deck's front matter names as its theme, if any."""
    found = re.search(r"^theme:\s*['\"]?(?:\./)?([\w./-]+\.css)['\"]?\s*$", text, re.MULTILINE)
    return [found.group(1)] if found and ".." not in found.group(1) else []


def deck_from_markdown(
    text: str,
    filename: str,
    files: Mapping[str, bytes],
    limits: DeckLimits,
    *,
    sourced: bool = True,
    read_import: ImportReader | None = None,
) -> DeckSource:
    """The deck in the Markdown `text` (named `filename`) with `files` (deck-relative paths).

    `sourced` pages say where in `filename` each slide starts, so compile problems name that
    line (`talk.md:42`); `deckyard import` turns it off, as its pages become their own files.
    A Marp deck is rendered by Marp's own engine (`marp_deck.py`), one HTML page per slide;
    imported (not `sourced`), its slides become Deckyard Markdown pages, to be edited as such.
    `read_import` reads the Markdown files that Slidev slides import (`src:`).
    """
    try:
        deck = parse_markdown_deck(text, read_import)
    except MarkdownDeckError as exc:
        code = Code.PAGE_NOT_FOUND if exc.missing_import else Code.MANIFEST_SYNTAX
        where = exc.file or filename
        raise DeckSourceError(code, f"{where}:{exc.line}: {exc.message}", file=where) from None
    if not deck.slides:
        raise DeckSourceError(Code.NO_PAGES, f"{filename} has no slides", file=filename)
    path: str | None = None
    css = ""
    if deck.convention is Convention.MARP and sourced:
        starts = [s.first_line for s in deck.slides]
        pages, size, warnings = marp_pages(text, deck.front_matter, filename, files, limits, starts)
    else:
        warnings = [
            SourceWarning(file=w.file or filename, line=w.line, slide=w.slide, message=w.message)
            for w in deck.warnings
        ]
        size = _size(deck, filename, warnings)
        look = _slidev(deck, filename, size, limits, warnings) if sourced else None
        if look is not None:
            warnings = [w for w in warnings if not honoured(w)] + look.warnings
            style = deck.deck.get("style")
            css = look.css + (f"\n{style}" if isinstance(style, str) else "")
        else:
            path, css = _theme(deck, filename, files, warnings)
        width = max(2, len(str(len(deck.slides))))
        pages = [
            PageSource(
                name=f"slide-{s.number:0{width}d}",
                kind=PageKind.MARKDOWN,
                text=s.page_text(filename if sourced else None),
            )
            for s in deck.slides
        ]
    warnings += unclosed_blocks(text, filename)
    lang = deck.deck.get("lang")
    raw: dict[str, Any] = {"title": _title(deck, filename), "slide": size}
    if isinstance(lang, str) and re.match(LANG_PATTERN, lang):
        raw["lang"] = lang
    author = deck.deck.get("author")
    if isinstance(author, str) and author.strip():
        raw["author"] = author.strip()[:300]
    if path is not None:
        raw["theme"] = path
    manifest = parse_manifest(raw, file=filename, prefix="")
    source = assemble_deck(
        manifest,
        files,
        limits,
        manifest_file=filename,
        extra_pages=pages,
        theme_css=css or None,
    )
    return source.model_copy(update={"warnings": [*source.warnings, *warnings]})


def load_markdown_bytes(data: bytes, filename: str, limits: DeckLimits) -> DeckSource:
    """A one-file Markdown deck sent as a request body (no assets: images are `data:` URIs)."""
    if len(data) > limits.max_body_bytes:
        raise DeckSourceError(
            Code.BODY_TOO_LARGE,
            f"the body is {len(data)} bytes; at most {limits.max_body_bytes} are allowed",
        )
    name = filename if is_markdown_file(filename) else f"{filename}.md"
    return deck_from_markdown(decode_text(data, name), name, {}, limits)
