"""The one interface every output format implements, and the values it works on.

A format turns a deck, as the deck job gathered it (`DeckInput`: the manifest's facts and,
per page, its rendered PNG, its layout and its speaker notes), into one file (`OutputFile`:
the bytes, a per-page report and warnings). The caller (a deck job) does the rendering and
the storing; a format only builds, off the event loop, and never talks to the renderer.
A format that needs another kind of render (the print document's PDF, the built site) adds
the field it needs to `DeckInput` and says so in `needs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class Needs(StrEnum):
    """What a format needs rendered before it can build."""

    PAGE_LAYOUTS = "page_layouts"
    """Every page's PNG and its layout, from the same render visit (`ScreenshotSpec.layout`)."""


@dataclass(frozen=True)
class PageInput:
    """One page as rendered: its name, PNG, layout (None when the render gave none), notes."""

    name: str
    png: bytes
    layout: dict[str, Any] | None
    notes: str = ""


@dataclass(frozen=True)
class DeckInput:
    """What a format builds from: the deck's metadata, slide size in CSS pixels, its pages."""

    title: str
    author: str | None
    lang: str
    width: int
    height: int
    pages: list[PageInput]


@dataclass(frozen=True)
class OutputFile:
    """A built output: its bytes, one report entry per page, and warnings for the user."""

    data: bytes
    pages: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


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

    async def make(self, deck: DeckInput) -> OutputFile:
        """Build the file from `deck` (off the event loop when the work is heavy)."""
        ...
