"""Makes a Slidev deck look the way Slidev shows it: Slidev's own styles, layouts and canvas.

Deckyard still compiles the Markdown (`slide_markdown.py`), but a Slidev deck's theme is the
CSS Slidev's own packages make for it (`slidev_engine.py`: UnoCSS with Slidev's config, its
client's and default theme's style sheets), and each slide is laid out by Slidev's own layout
(`compile/slidev_layouts.py`) on Slidev's canvas: `canvasWidth` (980 px) wide, at the deck's
`aspectRatio`, scaled to the slide size, so its rem-based type comes out as Slidev's. Each page
says so in its directives (`SLIDEV_DIRECTIVE`), with the canvas and the colour schema, so a
page stays self-contained. As in Slidev, the first slide's layout is `cover` and the others'
`default`. A page with Slidev's `<Toc>` also carries the deck's slide titles
(`compile/slidev_toc.py`). What the vendored packages cannot honour (another theme, a layout
they do not have) is a warning naming the slide and the line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deckyard.decks.compile.slidev_layouts import SHELL_CLASSES, layouts_available, slidev_layout
from deckyard.decks.compile.slidev_toc import toc_entries, uses_toc
from deckyard.decks.source.deck_source import SourceWarning
from deckyard.decks.source.markdown_deck import MarkdownDeck
from deckyard.decks.source.markdown_directives import SLIDEV_DIRECTIVE
from deckyard.decks.source.slidev_engine import SlidevUnavailable, slidev_css

CANVAS_WIDTH = 980
"""Slidev's default `canvasWidth`."""
THEMES = frozenset({"default", "@slidev/theme-default"})
"""The Slidev themes that are vendored."""
_NOW_HONOURED = (
    "UnoCSS utility classes have no effect",
    "front matter 'fonts' has no effect",
    "code-line highlighting ({…}) is ignored",
    "the Vue component <Toc> is not rendered",
)


@dataclass(frozen=True)
class SlidevLook:
    """A Slidev deck's theme CSS and what could not be honoured."""

    css: str
    warnings: list[SourceWarning]


def _dark(front: Mapping[str, Any]) -> bool:
    return str(front.get("colorSchema", "")).strip().lower() == "dark"


def _canvas_width(front: Mapping[str, Any]) -> int:
    value = front.get("canvasWidth")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return CANVAS_WIDTH


def slidev_look(
    deck: MarkdownDeck, filename: str, size: Mapping[str, int], *, timeout: float
) -> SlidevLook:
    """Slidev's look for `deck` (slide size `size`), its pages' directives set for it.

    Raises `SlidevUnavailable` when Slidev's packages are not installed or cannot build the
    styles; the deck then keeps Deckyard's own look, and the caller warns why.
    """
    if not layouts_available():
        raise SlidevUnavailable("the @slidev/client package is not installed")
    fonts = deck.front_matter.get("fonts")
    shell = f'<div class="dark {SHELL_CLASSES}"><div class="slidev-page"></div></div>'
    css = slidev_css(
        [s.text for s in deck.slides] + [shell],
        fonts if isinstance(fonts, dict) else None,
        timeout=timeout,
    )
    width = _canvas_width(deck.front_matter)
    canvas = {
        "width": width,
        "height": round(width * size["height"] / size["width"], 2),
        "scale": round(size["width"] / width, 6),
        "dark": _dark(deck.front_matter),
    }
    warnings: list[SourceWarning] = []
    toc = toc_entries([(s.number, s.text, s.front) for s in deck.slides])
    theme = deck.front_matter.get("theme")
    if isinstance(theme, str) and theme.strip() and theme.strip() not in THEMES:
        said = (
            f"Slidev's theme {theme.strip()!r} is not vendored; the slides use Slidev's "
            "default theme"
        )
        warnings.append(SourceWarning(file=filename, line=1, message=said))
    for slide in deck.slides:
        layout = slide.directives.get("layout") or ("cover" if slide.number == 1 else "default")
        if slidev_layout(str(layout)) is None:
            said = f"Slidev's layout {layout!r} is not vendored; the slide uses 'default'"
            where = slide.file or filename
            warnings.append(
                SourceWarning(file=where, line=slide.first_line, slide=slide.number, message=said)
            )
            layout = "default"
        slide.directives["layout"] = layout
        shown = {**canvas, "toc": toc, "slide": slide.number} if uses_toc(slide.text) else canvas
        slide.directives[SLIDEV_DIRECTIVE] = shown
    return SlidevLook(css, warnings)


def honoured(warning: SourceWarning) -> bool:
    """Whether `warning` (of the generic Markdown path) no longer holds under Slidev's look."""
    return warning.message.startswith(_NOW_HONOURED)
