"""Builds the pages of a Marp deck from marp-core's output: one HTML page per `<section>`.

A Marp deck (`marp: true`, or Marp's directives) is rendered by Marp's own engine
(`marp_engine.py`), so its themes, directives, `<!--fit-->`, math, line breaks and global
`<style>`s come out as Marp CLI makes them. Each page is a document of marp-core's CSS and one
slide inside Marp's container markup (`div.marpit > svg > foreignObject > section`), starting
with a mark (`<!--deckyard-slide marp 3-->`) that tells the compiler to keep the CSS as Marp
wrote it (unscoped, as for a reveal.js deck). The slide size is the one marp-core declares
(1280x720 unless the deck's `size` or theme says otherwise); a larger PNG is a render scale.
"""

from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import tinycss2

from deckyard.decks.source.assemble import decode_text
from deckyard.decks.source.deck_source import PageKind, PageSource, SourceWarning
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.marp_engine import MarpOutput, convert_marp
from deckyard.outputs.interface import NOTES_CLASS

MARP_MARK = re.compile(r"^<!--deckyard-slide marp (?P<number>\d+)(?: (?P<origin>[^\n]+?))?-->")
"""The mark a page of a Marp deck starts with: its slide's number and where that slide starts."""


_CONTAINER_CSS = (
    "div.marpit, div.marpit > svg[data-marpit-svg] { display: block; width: 100%; height: 100%; }\n"
)
_URL = re.compile(r"""url\(\s*(?P<q>["']?)(?P<ref>[^"')]+)(?P=q)\s*\)""")
_ABSOLUTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|/|#)", re.IGNORECASE)
_IGNORED_KEYS = ("width", "height", "aspectRatio", "canvasWidth", "revealOptions")


def _rebase(css: str, base_dir: str) -> str:
    """`css` with its relative `url()`s made relative to the deck's root instead of `base_dir`."""
    if not base_dir:
        return css

    def rebase(match: re.Match[str]) -> str:
        ref = match.group("ref").strip()
        if _ABSOLUTE.match(ref):
            return match.group(0)
        return f'url("{posixpath.normpath(posixpath.join(base_dir, ref))}")'

    return _URL.sub(rebase, css)


def _themes(front: Mapping[str, Any], files: Mapping[str, bytes]) -> tuple[list[str], int | None]:
    """Every CSS file of the deck (Marp CLI's `--theme-set`) and which one `theme:` names."""
    named = front.get("theme")
    wanted = named.strip().removeprefix("./") if isinstance(named, str) else ""
    paths = sorted(p for p in files if p.lower().endswith(".css"))
    themes = [_rebase(decode_text(files[p], p), posixpath.dirname(p)) for p in paths]
    default = paths.index(wanted) if wanted in paths else None
    return themes, default


def _import_target(rule: Any) -> str:
    for token in rule.prelude:
        if token.type in ("string", "url"):
            return str(token.value)
        if token.type == "function" and token.lower_name == "url":
            return "".join(str(a.value) for a in token.arguments if a.type == "string")
    return str(tinycss2.serialize(rule.prelude)).strip()


def page_css(css: str) -> tuple[str, list[str]]:
    """marp-core's CSS without what a page cannot have, and the remote sheets it imported.

    `@page` goes (the slide size is the deck's); an `@import` left in marp-core's CSS is a
    remote sheet (a built-in theme's web fonts), which the renderer, with no network, cannot
    load: the slide falls back to installed fonts, and the caller says so.
    """
    kept: list[str] = []
    remote: list[str] = []
    for rule in tinycss2.parse_stylesheet(css, skip_comments=True):
        if rule.type == "at-rule" and rule.lower_at_keyword == "page":
            continue
        if rule.type == "at-rule" and rule.lower_at_keyword == "import":
            remote.append(_import_target(rule))
            continue
        if rule.type == "at-rule" and rule.lower_at_keyword == "charset":
            continue
        kept.append(tinycss2.serialize([rule]))
    return "".join(kept).strip(), remote


def _notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    paragraphs = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
    return f'<aside class="{NOTES_CLASS}" hidden style="display:none">{paragraphs}</aside>\n'


def _page(
    number: int, origin: str | None, css: str, slide_html: str, notes: list[str], script: str
) -> str:
    style = css.replace("</style", "<\\/style")
    code = script.replace("</script", "<\\/script")
    mark = f"{number} {origin}" if origin else str(number)
    return (
        f"<!--deckyard-slide marp {mark}-->\n<!DOCTYPE html>\n<html>\n<head>\n"
        f'<meta charset="utf-8">\n<style>\n{style}\n</style>\n<style>\n{_CONTAINER_CSS}</style>\n'
        f'</head>\n<body>\n<div class="marpit">{slide_html}</div>\n{_notes_html(notes)}'
        f"<script>\n{code}\n</script>\n</body>\n</html>\n"
    )


def _warnings(
    front: Mapping[str, Any], out: MarpOutput, remote: list[str], filename: str
) -> list[SourceWarning]:
    found = [
        SourceWarning(
            file=filename,
            line=1,
            message=f"front matter {key!r} has no effect on a Marp deck; its slide size is "
            f"Marp's (size: {out.slides[0].width}x{out.slides[0].height})",
        )
        for key in _IGNORED_KEYS
        if key in front
    ]
    found += [
        SourceWarning(
            file=filename,
            line=1,
            message=f"the theme's remote stylesheet {url} is not loaded (the renderer has no "
            "network); its fonts fall back to installed ones",
        )
        for url in dict.fromkeys(remote)
    ]
    return found


def marp_pages(
    text: str,
    front: Mapping[str, Any],
    filename: str,
    files: Mapping[str, bytes],
    limits: DeckLimits,
    starts: list[int],
) -> tuple[list[PageSource], dict[str, int], list[SourceWarning]]:
    """The Marp deck `text` (front matter `front`) as pages, its slide size and its warnings.

    `starts` are the lines where the slides start (as Deckyard splits them); when Marp finds
    as many slides, each page's mark names its line, and compile problems name it too.

    Raises `DeckSourceError` when Marp's engine is missing or cannot convert the deck.
    """
    themes, default = _themes(front, files)
    out = convert_marp(
        text,
        themes,
        default_theme=default,
        filename=filename,
        allow_html=limits.markdown_html,
        timeout=limits.marp_timeout_seconds,
    )
    css, remote = page_css(out.css)
    width = max(2, len(str(len(out.slides))))
    origins = [f"{filename}:{line}" for line in starts]
    if len(origins) != len(out.slides):
        origins = [filename] * len(out.slides)
    pages = [
        PageSource(
            name=f"slide-{number:0{width}d}",
            kind=PageKind.HTML,
            text=_page(number, origin, css, slide.html, slide.notes, out.script),
        )
        for number, (slide, origin) in enumerate(zip(out.slides, origins, strict=True), start=1)
    ]
    size = {"width": out.slides[0].width, "height": out.slides[0].height} if out.slides else {}
    return pages, size, _warnings(front, out, remote, filename)
