"""The deck's source model: manifest (`deck.toml`), pages, assets, and the whole source.

Models are strict and refuse unknown fields, so `"1920"` for a width or a misspelt key is an
error naming the field rather than a silent coercion or a dropped setting. Paths are deck-root
relative POSIX paths (`assets/img/logo.png`); `assemble.py` checks them before building models.
"""

from __future__ import annotations

import posixpath
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PAGE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
FONT_FAMILY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,99}$"
LANG_PATTERN = r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$"
DEFAULT_SLIDE_WIDTH = 1920
DEFAULT_SLIDE_HEIGHT = 1080
MAX_PATH_LENGTH = 500
"""The longest deck-relative path stored (the width of the `path` columns)."""

MEDIA_TYPES: dict[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
    ".otf": "font/otf",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".txt": "text/plain",
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".wav": "audio/wav",
    ".pdf": "application/pdf",
}


def media_type_for(path: str) -> str:
    """The media type for `path` by its extension; unknown extensions are octet streams."""
    return MEDIA_TYPES.get(posixpath.splitext(path)[1].lower(), "application/octet-stream")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SlideSize(_Strict):
    """The fixed size of every slide, in CSS pixels."""

    width: int = Field(DEFAULT_SLIDE_WIDTH, ge=16)
    height: int = Field(DEFAULT_SLIDE_HEIGHT, ge=16)


class FontSpec(_Strict):
    """A web font shipped with the deck, declared once and usable from any page or the theme."""

    family: str = Field(pattern=FONT_FAMILY_PATTERN)
    file: str = Field(min_length=1, max_length=MAX_PATH_LENGTH)
    weight: int = Field(400, ge=1, le=1000)
    style: Literal["normal", "italic", "oblique"] = "normal"
    display: Literal["auto", "block", "swap", "fallback", "optional"] = "block"


class DeckManifest(_Strict):
    """`deck.toml`: title, author, slide size, theme stylesheet, page order and fonts.

    `pages`, when given, lists every page file in `pages/` in showing order (`"01-cover.md"`);
    when absent, pages are shown in file-name order.
    """

    title: str = Field(min_length=1, max_length=300)
    author: str | None = Field(None, min_length=1, max_length=300)
    lang: str = Field("en", pattern=LANG_PATTERN)
    slide: SlideSize = Field(default_factory=SlideSize)
    theme: str | None = Field(None, min_length=1, max_length=MAX_PATH_LENGTH)
    pages: list[str] | None = None
    fonts: list[FontSpec] = Field(default_factory=list)


class PageKind(StrEnum):
    """How a page's source is written."""

    HTML = "html"
    MARKDOWN = "md"


PAGE_EXTENSIONS: dict[str, PageKind] = {
    ".html": PageKind.HTML,
    ".htm": PageKind.HTML,
    ".md": PageKind.MARKDOWN,
    ".markdown": PageKind.MARKDOWN,
}


class PageSource(_Strict):
    """One page's source text; `name` is its file name without extension."""

    name: str = Field(pattern=PAGE_NAME_PATTERN)
    kind: PageKind
    text: str


class Asset(_Strict):
    """A file shipped with the deck, addressed by its deck-root relative path."""

    path: str = Field(min_length=1, max_length=MAX_PATH_LENGTH)
    data: bytes
    media_type: str = Field(min_length=1, max_length=200)


class SourceWarning(_Strict):
    """Something of the source that Deckyard does not carry over: where it is and what."""

    file: str | None = None
    line: int | None = None
    slide: int | None = None
    message: str

    def describe(self) -> str:
        """One readable line: `talk.md:12 (slide 3): message`."""
        where = self.file or "deck"
        if self.line is not None:
            where += f":{self.line}"
        if self.slide is not None:
            where += f" (slide {self.slide})"
        return f"{where}: {self.message}"


class DeckSource(_Strict):
    """Everything needed to compile a deck, loaded and checked; no file system access needed.

    `assets` maps each asset's path to the asset. `theme_css` is the theme's text (empty when
    there is none) and `theme_path` where it came from, which is the base for its `url()`s.
    `warnings` lists what the source uses that is not carried over (a one-file Markdown deck's
    unsupported constructs); they do not stop the deck. `other_files` are files the source had
    outside the deck's layout (not in `assets/`), named so a message can say "move it".
    """

    manifest: DeckManifest
    pages: list[PageSource] = Field(min_length=1)
    assets: dict[str, Asset] = Field(default_factory=dict)
    theme_css: str = ""
    theme_path: str | None = None
    warnings: list[SourceWarning] = Field(default_factory=list)
    other_files: frozenset[str] = frozenset()

    def page(self, name: str) -> PageSource | None:
        """The page called `name`, or None."""
        return next((page for page in self.pages if page.name == name), None)

    @property
    def width(self) -> int:
        """Slide width in CSS pixels."""
        return self.manifest.slide.width

    @property
    def height(self) -> int:
        """Slide height in CSS pixels."""
        return self.manifest.slide.height
