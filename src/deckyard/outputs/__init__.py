"""Deckyard's output formats in one place: one module per format behind one interface
(`interface.OutputFormat`), and `OUTPUTS`, the one registry the CLI, the API and the deck
jobs look formats up in. Adding a format means its module and one line here.

The registry holds the formats `deck.export` makes: the PDF (from the printed deck), the PPTX
(from the rendered pages and their layouts), the site ZIP (from the compiled pages, then
checked as a site) and the pictures, PNG, JPEG or WebP (a ZIP of a picture per page, a PNG
being the one its validation rendered).
"""

from __future__ import annotations

from deckyard.outputs.images import JPEG, PNG, WEBP
from deckyard.outputs.interface import (
    NOTES_CLASS,
    SLIDE_ANCHOR_PREFIX,
    CompiledInput,
    DeckInput,
    Needs,
    OutputFile,
    OutputFormat,
    PageImage,
    PageInput,
    Printed,
    Verify,
)
from deckyard.outputs.pdf import PDF
from deckyard.outputs.pptx import PPTX
from deckyard.outputs.site import SITE

OUTPUTS: dict[str, OutputFormat] = {f.name: f for f in (PDF, PPTX, SITE, PNG, JPEG, WEBP)}
"""Every registered output format, by name (the first is the export's default)."""

__all__ = [
    "NOTES_CLASS",
    "OUTPUTS",
    "SLIDE_ANCHOR_PREFIX",
    "CompiledInput",
    "DeckInput",
    "Needs",
    "OutputFile",
    "OutputFormat",
    "PageImage",
    "PageInput",
    "Printed",
    "Verify",
]
