"""Builds a `DeckSource` from a reveal.js HTML deck: an `index.html` and the files beside it.

Rendered the way decktape does: one page per slide, each the whole deck document plus a mark
naming the slide (`<!--deckyard-slide reveal.js 2 0-->`), which the compiler turns into a few
lines that initialise reveal.js without transitions, hash or fragments and go to that slide
through reveal.js's own API (`Reveal.slide(h, v)`). The deck's CSS is not scoped, so its theme
stays as written. The folder's files become assets under `assets/`, where the page's references
are resolved. The slides are counted from the markup (`.reveal .slides > section`, nested
sections as vertical slides, hidden ones left out as reveal.js removes them), after the
`data-markdown` sections are cut into their slides as reveal.js's Markdown plugin cuts them
(`reveal_markdown.py`). A deck's HTML file need not be `index.html` (`reveal_entry`). The
Math plugin is given the vendored KaTeX instead of a CDN's (`reveal_math.py`). A remote web page
in a slide (`data-background-iframe`, an `<iframe src>`) is left out with a warning: the renderer
has no network, and a page is not a file that could be fetched for it (`without_remote_frames`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from bs4 import BeautifulSoup
from bs4.element import Tag

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import ASSETS_DIR, assemble_deck, parse_manifest
from deckyard.decks.source.deck_source import DeckSource, PageKind, PageSource, SourceWarning
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.reveal_markdown import NEVER, expand_markdown_sections, markdown_notes
from deckyard.decks.source.reveal_math import with_math

INDEX_FILE = "index.html"
REVEAL_WIDTH = 960
REVEAL_HEIGHT = 700
"""reveal.js's own default slide size, used (as decktape does) unless the deck configures one."""
SLIDE_MARK = re.compile(r"^<!--deckyard-slide reveal\.js (?:(?P<h>\d+) (?P<v>\d+)|print)-->")
"""The mark a page of a reveal.js deck starts with: the slide it shows, or `print`: all."""


def slide_position(page: PageSource) -> tuple[int, int] | None:
    """(h, v) of the reveal.js slide `page` shows, None for any other page."""
    mark = SLIDE_MARK.match(page.text) if page.kind is PageKind.HTML else None
    if mark is None or mark["h"] is None:
        return None
    return int(mark["h"]), int(mark["v"])


def print_page(
    page: PageSource, keep: Collection[tuple[int, int]] | None = None
) -> PageSource | None:
    """The page that prints every slide of `page`'s reveal.js deck, None for another page.

    With `keep`, only the slides at those (h, v) are printed: the others are marked hidden,
    as an author hides a slide, so reveal.js's print view leaves them out (a slide that
    failed is in neither the PDF nor the site)."""
    mark = SLIDE_MARK.match(page.text) if page.kind is PageKind.HTML else None
    if mark is None:
        return None
    body = page.text[mark.end() :]
    if keep is not None:
        body = _only_slides(body, set(keep))
    return page.model_copy(update={"text": "<!--deckyard-slide reveal.js print-->" + body})


def _only_slides(text: str, keep: set[tuple[int, int]]) -> str:
    soup = BeautifulSoup(text, "html5lib")
    dropped = [s for h, v, s in reveal_slides(soup) if (h, v) not in keep]
    if not dropped:
        return text
    for section in dropped:
        section["data-visibility"] = "hidden"
    container = soup.select_one(".reveal > .slides")
    for stack in _shown_sections(container) if container else []:
        if stack.find("section", recursive=False) and not _shown_sections(stack):
            stack["data-visibility"] = "hidden"  # a vertical stack with none of its slides
    return str(soup)


def section_notes(section: Tag) -> list[str]:
    """The speaker notes of one reveal.js slide: its `aside.notes` and its `data-notes`."""
    notes = [a.get_text().strip() for a in section.select("aside.notes")]
    notes += [str(section["data-notes"]).strip()] if section.has_attr("data-notes") else []
    notes += [n for n in [markdown_notes(section)] if n]
    return [n for n in notes if n]


def reveal_page_notes(text: str) -> list[str]:
    """The speaker notes of the slide a reveal.js deck page shows ([] for any other page)."""
    mark = SLIDE_MARK.match(text)
    if mark is None or mark["h"] is None:
        return []
    at = (int(mark["h"]), int(mark["v"]))
    soup = BeautifulSoup(text[mark.end() :], "html5lib")
    section = next((s for h, v, s in reveal_slides(soup) if (h, v) == at), None)
    return [] if section is None else section_notes(section)


_SIZE = re.compile(r"\b(?P<key>width|height)\s*:\s*(?P<value>\d{2,5})\b")


def is_reveal_html(text: str) -> bool:
    """Whether the HTML `text` is a reveal.js deck (a `.reveal` holding `.slides`)."""
    return bool(re.search(r"class=[\"'][^\"']*\breveal\b", text)) and bool(
        re.search(r"class=[\"'][^\"']*\bslides\b", text)
    )


def _shown_sections(parent: Tag) -> list[Tag]:
    """The child `<section>`s of `parent` that reveal.js keeps: it removes every slide marked
    `data-visibility="hidden"` when it starts, so later slides' indices close the gap."""
    return [
        c
        for c in parent.find_all("section", recursive=False)
        if isinstance(c, Tag) and c.get("data-visibility") != "hidden"
    ]


def reveal_slides(soup: BeautifulSoup) -> list[tuple[int, int, Tag]]:
    """(h, v, section) of each slide reveal.js shows, in its order (hidden slides left out)."""
    container = soup.select_one(".reveal > .slides")
    if container is None:
        return []
    found: list[tuple[int, int, Tag]] = []
    for h, stack in enumerate(_shown_sections(container)):
        for v, section in enumerate(_shown_sections(stack) or [stack]):
            found.append((h, v, section))
    return found


def reveal_entry(names: list[str], read: Callable[[str], str], where: str) -> str | None:
    """The HTML file of a reveal.js deck among the top-level `names` of a folder or ZIP.

    `index.html` when it is a reveal.js deck, else the one top-level `.html` file that is;
    None when none is. Several candidates and no `index.html` is an error naming them, since
    picking one would render a deck the user may not have meant.
    """
    if INDEX_FILE in names and is_reveal_html(read(INDEX_FILE)):
        return INDEX_FILE
    found = sorted(
        n for n in names if n.lower().endswith((".html", ".htm")) and is_reveal_html(read(n))
    )
    if len(found) > 1:
        raise DeckSourceError(
            Code.NO_PAGES,
            f"{where} holds several reveal.js decks ({', '.join(found)}) and no index.html; "
            f"give the one to render as the deck (e.g. {where.rstrip('/')}/{found[0]})",
        )
    return found[0] if found else None


def _size(soup: BeautifulSoup) -> dict[str, int]:
    """The `width`/`height` given to `Reveal.initialize`, else reveal.js's default."""
    size = {"width": REVEAL_WIDTH, "height": REVEAL_HEIGHT}
    for script in soup.find_all("script"):
        text = str(script.string or "")  # bs4's get_text() leaves a script's text out
        if "Reveal.initialize" not in text:
            continue
        for match in _SIZE.finditer(text.split("Reveal.initialize", 1)[1]):
            size[match.group("key")] = int(match.group("value"))
    return size


def _warnings(
    slides: list[tuple[int, int, Tag]], soup: BeautifulSoup, filename: str
) -> list[SourceWarning]:
    out: list[SourceWarning] = []
    for number, (_h, _v, section) in enumerate(slides, start=1):
        line = section.sourceline
        if section.has_attr("data-markdown") and section.get("data-separator") != NEVER:
            out.append(
                SourceWarning(
                    file=filename,
                    line=line,
                    slide=number,
                    message="a data-markdown section is counted as one slide and is not split; "
                    "render its Markdown as a one-file deck (deckyard render talk.md)",
                )
            )
        if section.select_one(".fragment") is not None:
            out.append(
                SourceWarning(
                    file=filename, line=line, slide=number, message="fragments show at once"
                )
            )
    if any(v for _h, v, _s in slides):
        out.append(SourceWarning(file=filename, message="vertical slides are shown in order"))
    for script in soup.find_all("script"):
        if script.get("type") == "module":
            out.append(
                SourceWarning(
                    file=filename,
                    line=script.sourceline,
                    message="a module script is not run: load reveal.js with "
                    '<script src="dist/reveal.js">',
                )
            )
    return out


_REFERENCE_ATTRIBUTES = (
    "src",
    "href",
    "poster",
    "data-src",
    "data-markdown",
    "data-background",
    "data-background-image",
    "data-background-video",
)


_REMOTE_URL = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
_FRAME_TAG = re.compile(r"<(?P<tag>section|iframe)\b[^>]*>", re.IGNORECASE)
_FRAME_ATTRIBUTE = {
    "section": re.compile(
        r"(?<=\s)data-background-iframe(?=\s*=\s*[\"']?\s*(?:https?:)?//)", re.IGNORECASE
    ),
    "iframe": re.compile(r"(?<=\s)src(?=\s*=\s*[\"']?\s*(?:https?:)?//)", re.IGNORECASE),
}
LEFT_OUT_FRAME = "data-deckyard-remote-frame"
"""What a remote frame's attribute is renamed to: the markup keeps the URL, reveal.js ignores it."""


def without_remote_frames(
    text: str, slides: list[tuple[int, int, Tag]], soup: BeautifulSoup, filename: str
) -> tuple[str, list[SourceWarning]]:
    """`text` with its remote iframe backgrounds and `<iframe src>`s left out, and a warning each.

    The attribute is renamed in place (`LEFT_OUT_FRAME`), so lines keep their numbers; the slide
    shows as if the frame had not loaded, its own background (or the theme's) behind it.
    """

    def rename(match: re.Match[str]) -> str:
        return _FRAME_ATTRIBUTE[match["tag"].lower()].sub(LEFT_OUT_FRAME, match[0], count=1)

    numbers = {id(section): n for n, (_h, _v, section) in enumerate(slides, start=1)}
    warnings: list[SourceWarning] = []
    for frame in soup.select("section[data-background-iframe], iframe[src]"):
        name = "src" if frame.name == "iframe" else "data-background-iframe"
        url = frame.get(name)
        if not isinstance(url, str) or not _REMOTE_URL.match(url):
            continue
        section = frame if frame.name == "section" else frame.find_parent("section")
        while section is not None and id(section) not in numbers:
            section = section.find_parent("section")
        what = "an iframe background" if frame.name == "section" else "an <iframe>"
        warnings.append(
            SourceWarning(
                file=filename,
                line=frame.sourceline,
                slide=numbers.get(id(section)) if section is not None else None,
                message=f"{what} showing a web page ({url.strip()[:200]}) is left out: renders "
                "have no network, and a web page cannot be fetched as a file",
            )
        )
    if not warnings:
        return text, []
    return _FRAME_TAG.sub(rename, text), warnings


def rebase_references(text: str, folder: str) -> str:
    """`text` (an HTML deck in `folder`) with its relative references made relative to the
    deck's root instead (`../dist/reveal.js` in `examples/` -> `dist/reveal.js`)."""
    soup = BeautifulSoup(text, "html5lib")
    for tag in soup.find_all(True):
        for name in _REFERENCE_ATTRIBUTES:
            value = tag.get(name)
            if not isinstance(value, str) or not value.strip():
                continue
            ref = value.strip()
            if ref.startswith(("#", "/", "data:")) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", ref):
                continue
            rebased = posixpath.normpath(posixpath.join(folder, ref))
            if not rebased.startswith(".."):
                tag[name] = rebased
    return str(soup)


def deck_from_reveal_html(
    text: str, files: Mapping[str, bytes], limits: DeckLimits, filename: str = INDEX_FILE
) -> DeckSource:
    """The reveal.js deck in `text` (its `index.html`) with the `files` beside it."""
    soup = BeautifulSoup(text, "html5lib")
    split_warnings = expand_markdown_sections(soup, files, filename)
    if any(s.get("data-separator") == NEVER for s in soup.select("section[data-markdown]")):
        text = str(soup)
    slides = reveal_slides(soup)
    if not slides:
        raise DeckSourceError(
            Code.NO_PAGES, f"{filename}: no <section> slides in .reveal .slides", file=filename
        )
    text, frame_warnings = without_remote_frames(text, slides, soup, filename)
    text, math_files, math_warnings = with_math(text, filename)
    files = {**files, **math_files}
    width = max(2, len(str(len(slides))))
    pages = [
        PageSource(
            name=f"slide-{number:0{width}d}",
            kind=PageKind.HTML,
            text=f"<!--deckyard-slide reveal.js {h} {v}-->{text}",
        )
        for number, (h, v, _section) in enumerate(slides, start=1)
    ]
    title = soup.title.get_text().strip() if soup.title else ""
    raw: dict[str, Any] = {"title": (title or filename)[:300], "slide": _size(soup)}
    lang = soup.html.get("lang") if soup.html else None
    if isinstance(lang, str) and re.match(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$", lang):
        raw["lang"] = lang
    author = soup.find("meta", attrs={"name": "author"})
    content = author.get("content") if author else None
    if isinstance(content, str) and content.strip():
        raw["author"] = content.strip()[:300]
    manifest = parse_manifest(raw, file=filename, prefix="")
    assets = {ASSETS_DIR + path: data for path, data in files.items() if path != filename}
    source = assemble_deck(manifest, assets, limits, manifest_file=filename, extra_pages=pages)
    warnings = [*source.warnings, *split_warnings, *_warnings(slides, soup, filename)]
    return source.model_copy(update={"warnings": warnings + frame_warnings + math_warnings})
