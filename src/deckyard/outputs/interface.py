"""The one interface every output format implements, and the values it works on.

A format turns a deck, as the deck job gathered it (`DeckInput`: the manifest's facts and
what the format's `needs` asked for: per page, its PNG, its layout and its speaker notes; or
per page, its picture at the format's settings; or the print document and Chromium's PDF of
it; or every page's compiled document, unrendered),
into one file (`OutputFile`: the bytes, a per-page report, warnings and facts for the job's
result). The caller (the `deck.export` job) does the rendering, the checking the format's
`verify` names, and the storing; a format only builds, off the event loop, and never talks to
the renderer. A format that needs another kind of render adds a `Needs` and the field it fills
to `DeckInput`; one that needs another check after building adds a `Verify`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

SLIDE_ANCHOR_PREFIX = "slide-"
"""The id of slide N in a print document is `slide-N`: its `#slide-N` links jump there."""

NOTES_CLASS = "dy-notes"
"""The class of the hidden `<aside>` of a compiled page that holds its speaker notes (the
compilers write it; the formats read the notes from it)."""


class Needs(StrEnum):
    """What a format needs rendered before it can build."""

    PAGE_LAYOUTS = "page_layouts"
    """Every page's PNG and its layout, from the same render visit (`ScreenshotSpec.layout`)."""

    PRINTED = "printed"
    """The deck's print document (a printed page per slide) and Chromium's PDF of it."""

    COMPILED = "compiled"
    """Every page's compiled document, with no render (`DeckInput.compiled`)."""

    PAGE_IMAGES = "page_images"
    """Every page's picture at the format's `picture` settings (`DeckInput.images`): the
    picture an earlier render of the same page and settings made (its validation's, for a
    PNG at scale 1) where there is one, the others rendered in one deck render."""


class Verify(StrEnum):
    """What the deck job checks of a built file before it stores it."""

    NONE = "none"
    """Nothing beyond the build."""

    SITE = "site"
    """A static site ZIP: a safe extraction checked against its `manifest.json`, then its
    `index.html` loaded in Chromium with the site's files as the only reachable ones (a
    failed or blocked request, a page error or a broken image refuses the file)."""


class CompiledInput(Protocol):
    """One compiled page as a format reads it (the deck compiler's `CompiledPage` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def document(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...


@dataclass(frozen=True)
class PageInput:
    """One page as rendered: its name, PNG, layout (None when the render gave none), notes."""

    name: str
    png: bytes
    layout: dict[str, Any] | None
    notes: str = ""


@dataclass(frozen=True)
class PageImage:
    """One page's picture: the page's name, its position in the deck, its encoded bytes."""

    name: str
    index: int
    data: bytes


@dataclass(frozen=True)
class Printed:
    """The compiled print document and the PDF Chromium printed from it."""

    document: str
    pdf: bytes


@dataclass(frozen=True)
class DeckInput:
    """What a format builds from: the deck's metadata, slide size in CSS pixels, its slide
    count, its version (`{deck id}.{deck version}`), and what `needs` asked for (`pages`,
    `images`, `printed` or `compiled`)."""

    title: str
    author: str | None
    lang: str
    width: int
    height: int
    slides: int
    pages: list[PageInput] = field(default_factory=list)
    printed: Printed | None = None
    compiled: list[CompiledInput] = field(default_factory=list)
    images: list[PageImage] = field(default_factory=list)
    version: str | None = None
    budget_bytes_per_slide: int = 0
    """A file size a slide may take before the format warns (0: no budget)."""


@dataclass(frozen=True)
class OutputFile:
    """A built output: its bytes, one report entry per page, warnings for the user, and facts
    of the format the job's result carries as they are (the PDF's `outline`)."""

    data: bytes
    pages: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


class OutputFormat(Protocol):
    """One output format: what it is called, the file it makes, and how it builds it."""

    @property
    def name(self) -> str:
        """The format's name on the CLI (`--format`) and the API (`?format=`)."""
        ...

    @property
    def file_name(self) -> str:
        """The file `deckyard render` writes it to, under OUT."""
        ...

    @property
    def media_type(self) -> str:
        """The artefact's content type."""
        ...

    @property
    def needs(self) -> Needs:
        """What the deck job renders for it."""
        ...

    @property
    def verify(self) -> Verify:
        """What the deck job checks of the built file before storing it."""
        ...

    @property
    def picture(self) -> dict[str, Any] | None:
        """With `Needs.PAGE_IMAGES`: the screenshot settings of each page's picture (`format`,
        `scale`, ...); None for a format that needs no pictures."""
        ...

    @property
    def unpacked(self) -> str | None:
        """The folder under OUT that `deckyard render` unpacks the file into (a ZIP of one
        file per page, each named in its `manifest.json`), None when it writes the file as
        it is (to `file_name`)."""
        ...

    @property
    def stepped(self) -> bool:
        """Whether a page per step (`steps`) applies: a file of still pages does; one that
        plays the steps itself (the site) does not."""
        ...

    async def make(self, deck: DeckInput) -> OutputFile:
        """Build the file from `deck` (off the event loop when the work is heavy)."""
        ...
