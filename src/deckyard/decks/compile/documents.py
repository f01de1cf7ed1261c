"""Compiles a deck's pages into self-contained HTML documents sized to the slide.

Each page document holds a fixed-size `.slide` root (the deck's width x height), the deck's fonts
as `data:` URIs, the theme, the page's scoped CSS and its content, and needs no network. The
print document holds every slide, one per printed page at slide size, for PDF export.
"""

from __future__ import annotations

import hashlib
import html
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from deckyard.decks.compile.assets import AssetResolver, ReferenceProblem
from deckyard.decks.compile.css_scope import CssContext, rewrite_stylesheet
from deckyard.decks.compile.html_page import PagePart, compile_part
from deckyard.decks.compile.steps import reveal_print_mark, split_step
from deckyard.decks.compile.themes import core_css, expand_theme, only_markdown
from deckyard.decks.diagrams import MERMAID_CLASS, mermaid_scripts
from deckyard.decks.errors import CompileError, CompileErrorCode, CompileProblem
from deckyard.decks.source.assemble import MANIFEST_FILE, field_path
from deckyard.decks.source.deck_source import DeckSource, PageKind, PageSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.reveal_html import print_page, slide_position
from deckyard.outputs.interface import SLIDE_ANCHOR_PREFIX

"""A slide of the print document has the id `slide-N` (N from 1): `#slide-3` links to slide 3."""
_FONT_FORMATS = {".woff2": "woff2", ".woff": "woff", ".ttf": "truetype", ".otf": "opentype"}


@dataclass(frozen=True)
class CompiledPage:
    """One compiled page: its self-contained document and the document's SHA-256."""

    name: str
    index: int
    kind: PageKind
    document: str
    sha256: str
    width: int
    height: int

    @property
    def size(self) -> int:
        """The document's size in bytes, UTF-8 encoded."""
        return len(self.document.encode("utf-8"))


@dataclass(frozen=True)
class CompileReport:
    """Every page that compiled and every problem found, in page order."""

    pages: list[CompiledPage]
    problems: list[CompileProblem]

    def problems_of(self, page: str) -> list[CompileProblem]:
        """The problems found in `page` (the theme's count for every page)."""
        return [p for p in self.problems if p.page == page]


@dataclass(frozen=True)
class _Shared:
    """What every document of one deck has in common: fonts and theme, already inlined."""

    fonts_css: str
    theme_css: str
    problems: list[CompileProblem]


def _font_faces(deck: DeckSource, resolver: AssetResolver, problems: list[CompileProblem]) -> str:
    """The manifest's fonts as `@font-face` rules; a font whose file is gone is a problem of
    `deck.toml` (it fails every page, as a theme problem does), never an exception."""
    faces: list[str] = []
    for i, font in enumerate(deck.manifest.fonts):
        path = posixpath.normpath(font.file)
        try:
            src = resolver.resolve(path)
        except ReferenceProblem as problem:
            where = field_path(("fonts", i, "file"))
            problems.append(
                CompileProblem(
                    problem.code, f"{where}: {problem.message}", MANIFEST_FILE, font.file
                )
            )
            continue
        fmt = _FONT_FORMATS.get(posixpath.splitext(path)[1].lower())
        hint = f' format("{fmt}")' if fmt else ""
        faces.append(
            f'@font-face {{ font-family: "{font.family}"; src: url("{src}")'
            f"{hint}; font-weight: {font.weight}; font-style: {font.style}; "
            f"font-display: {font.display}; }}"
        )
    return "\n".join(faces)


def _shared(deck: DeckSource, resolver: AssetResolver) -> _Shared:
    problems: list[CompileProblem] = []
    fonts_css = _font_faces(deck, resolver, problems)
    theme_css, theme_path = deck.theme_css, deck.theme_path
    implicit = not theme_css and any(p.kind is PageKind.MARKDOWN for p in deck.pages)
    if implicit:
        theme_css = '@import "default";'
    sheets = [core_css()]
    if theme_css:
        files = {path: asset.data for path, asset in deck.assets.items()}
        expanded = expand_theme(theme_css, theme_path, files)
        origin = theme_path or "theme"
        for found in expanded.problems:
            where = f"{found.origin}:{found.line}: " if found.origin != origin else ""
            problems.append(
                CompileProblem(found.code, where + found.message, origin, None, found.line)
            )
        for sheet in expanded.sheets:
            ctx = CssContext(resolver, base_dir=sheet.base_dir)
            css = rewrite_stylesheet(sheet.css, ctx)
            sheets.append(only_markdown(css) if implicit else css)
            problems.extend(
                CompileProblem(p.code, p.message, origin, p.reference, p.line) for p in ctx.problems
            )
    theme = "\n".join(sheets)
    return _Shared(fonts_css, theme, problems)


def _base_css(width: int, height: int, *, print_mode: bool) -> str:
    css = (
        "html, body { margin: 0; padding: 0; }\n"
        f".slide {{ position: relative; box-sizing: border-box !important; "
        f"width: {width}px !important; height: {height}px !important; overflow: hidden; }}\n"
    )
    if print_mode:
        css = (
            f"@page {{ size: {width}px {height}px; margin: 0; }}\n"
            + css
            + ".slide { break-after: page; page-break-after: always; }\n"
            ".slide:last-child { break-after: auto; page-break-after: auto; }\n"
        )
    else:
        css += f"html, body {{ width: {width}px; height: {height}px; }}\n"
    return css


def _slide(part: PagePart, number: int, *, print_mode: bool) -> str:
    """One slide's root; in the print document it carries `id="slide-N"`, so a link to
    `#slide-N` becomes a link to that page of the PDF.

    A step of a stepped deck (`steps.py`) is numbered as its slide, carries `data-step`, and
    only its first step has the anchor."""
    classes = " ".join(["slide", *part.slide_classes])
    step = ""
    if part.step is not None:
        number, step = part.step.number, f' data-step="{part.step.step}"'
    first = part.step is None or part.step.step == 0
    anchor = f' id="{SLIDE_ANCHOR_PREFIX}{number}"' if print_mode and first else ""
    return (
        f'<div class="{html.escape(classes)}"{anchor} data-page="{part.name}" '
        f'data-kind="{part.kind.value}" data-number="{number}"{step}>{part.body_html}</div>'
    )


def _page_styles(parts: Sequence[PagePart]) -> list[tuple[str, str]]:
    """Each part's CSS, labelled, once: an unscoped page's CSS (a Marp deck's, the same on every
    page) would otherwise repeat once per slide in the print document."""
    first: dict[str, str] = {}
    for part in parts:
        first.setdefault(part.css, part.name)
    return [(f"page {name}", css) for css, name in first.items()]


def _document(
    deck: DeckSource,
    shared: _Shared,
    parts: Sequence[PagePart],
    title: str,
    *,
    print_mode: bool,
    first_number: int = 1,
) -> str:
    styles = [
        ("base", _base_css(deck.width, deck.height, print_mode=print_mode)),
        ("fonts", shared.fonts_css),
        ("theme", shared.theme_css),
        *_page_styles(parts),
    ]
    head = "".join(
        f'<style data-deckyard="{html.escape(label)}">\n{css}\n</style>\n'
        for label, css in styles
        if css
    )
    body = "\n".join(
        _slide(part, first_number + i, print_mode=print_mode) for i, part in enumerate(parts)
    )
    if any(f'<pre class="{MERMAID_CLASS}">' in part.body_html for part in parts):
        body += "\n" + mermaid_scripts()
    return (
        f'<!DOCTYPE html>\n<html lang="{deck.manifest.lang}">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width={deck.width}, height={deck.height}">\n'
        '<base target="_blank">\n'
        f"<title>{html.escape(title)}</title>\n{head}</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _too_large(document: str, page: str, limits: DeckLimits) -> CompileProblem | None:
    size = len(document.encode("utf-8"))
    if size <= limits.max_document_bytes:
        return None
    return CompileProblem(
        CompileErrorCode.DOCUMENT_TOO_LARGE,
        f"the compiled document is {size} bytes; at most {limits.max_document_bytes} are allowed",
        page,
    )


def _compile_at(
    deck: DeckSource,
    shared: _Shared,
    resolver: AssetResolver,
    index: int,
    page: PageSource,
    limits: DeckLimits,
) -> tuple[CompiledPage | None, list[CompileProblem]]:
    """Page `page` at position `index` of `deck` compiled, or None, and its own problems."""
    part = compile_part(page, resolver, limits)
    title = f"{deck.manifest.title} - {page.name}"
    document = _document(deck, shared, [part], title, print_mode=False, first_number=index + 1)
    oversize = _too_large(document, page.name, limits)
    found = part.problems + ([oversize] if oversize else [])
    if found or shared.problems:
        return None, found
    digest = hashlib.sha256(document.encode("utf-8")).hexdigest()
    compiled = CompiledPage(page.name, index, page.kind, document, digest, deck.width, deck.height)
    return compiled, found


def compile_deck_report(deck: DeckSource, limits: DeckLimits) -> CompileReport:
    """Compile every page; pages with problems are left out of `pages` and listed in `problems`.

    A theme problem is reported once, under the theme's path, and fails every page.
    """
    resolver = AssetResolver(deck.assets, deck.other_files)
    shared = _shared(deck, resolver)
    pages: list[CompiledPage] = []
    problems = list(shared.problems)
    for index, page in enumerate(deck.pages):
        compiled, found = _compile_at(deck, shared, resolver, index, page, limits)
        problems.extend(found)
        if compiled is not None:
            pages.append(compiled)
    return CompileReport(pages, problems)


def compile_deck(deck: DeckSource, limits: DeckLimits) -> list[CompiledPage]:
    """Every page compiled, in order; raises `CompileError` listing all problems if any."""
    report = compile_deck_report(deck, limits)
    if report.problems:
        raise CompileError(report.problems)
    return report.pages


def compile_page(deck: DeckSource, name: str, limits: DeckLimits) -> CompiledPage:
    """The page called `name` compiled; raises `CompileError` with its and the theme's problems.

    The document is the one `compile_deck_report` makes for that page (same slide number), so
    what validation renders is what the page version stores.
    """
    page = deck.page(name)
    if page is None:
        problem = CompileProblem(CompileErrorCode.PAGE_NOT_FOUND, f"no page {name!r}", name)
        raise CompileError([problem])
    resolver = AssetResolver(deck.assets, deck.other_files)
    shared = _shared(deck, resolver)
    compiled, found = _compile_at(deck, shared, resolver, deck.pages.index(page), page, limits)
    if compiled is None:
        raise CompileError(shared.problems + found)
    return compiled


def compile_each(deck: DeckSource, limits: DeckLimits) -> dict[str, CompiledPage | CompileError]:
    """Every page compiled on its own terms: what `compile_page` gives (or raises) for each,
    with the deck's fonts and theme expanded once instead of once per page."""
    resolver = AssetResolver(deck.assets, deck.other_files)
    shared = _shared(deck, resolver)
    each: dict[str, CompiledPage | CompileError] = {}
    for index, page in enumerate(deck.pages):
        compiled, found = _compile_at(deck, shared, resolver, index, page, limits)
        if compiled is None:
            each[page.name] = CompileError(shared.problems + found)
        else:
            each[page.name] = compiled
    return each


def _reveal_print_document(deck: DeckSource, page: PageSource, limits: DeckLimits) -> str:
    """A reveal.js deck's print document: the deck once, in reveal.js's print view."""
    resolver = AssetResolver(deck.assets, deck.other_files)
    part = compile_part(page, resolver, limits)
    if part.problems:
        raise CompileError(part.problems)
    css = (
        f"@page {{ size: {deck.width}px {deck.height}px; margin: 0; }}\n"
        "html, body { margin: 0; padding: 0; }\n" + part.css
    )
    return (
        f'<!DOCTYPE html>\n<html lang="{deck.manifest.lang}">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(deck.manifest.title)}</title>\n"
        f'<style data-deckyard="page {part.name}">\n{css}\n</style>\n</head>\n'
        f"<body>\n{part.body_html}\n</body>\n</html>\n"
    )


def compile_print_document(deck: DeckSource, limits: DeckLimits) -> str:
    """One document with every slide as a printed page of slide size, for PDF export.

    A reveal.js deck prints through reveal.js's own print view instead (of a stepped deck,
    `steps.step_deck`, with a page per fragment step). Raises `CompileError` when any page
    (or the theme) has problems.
    """
    plain = [split_step(page) for page in deck.pages]
    shown = [at for page, _mark in plain if (at := slide_position(page)) is not None]
    reveal = print_page(plain[0][0], keep=shown)
    if reveal is not None:
        if plain[0][1] is not None:
            reveal = reveal.model_copy(update={"text": reveal_print_mark() + reveal.text})
        document = _reveal_print_document(deck, reveal, limits)
        oversize = _too_large(document, "(print)", limits)
        if oversize:
            raise CompileError([oversize])
        return document
    resolver = AssetResolver(deck.assets, deck.other_files)
    shared = _shared(deck, resolver)
    parts = [compile_part(page, resolver, limits) for page in deck.pages]
    problems = shared.problems + [p for part in parts for p in part.problems]
    if problems:
        raise CompileError(problems)
    document = _document(deck, shared, parts, deck.manifest.title, print_mode=True)
    oversize = _too_large(document, "(print)", limits)
    if oversize:
        raise CompileError([oversize])
    return document
