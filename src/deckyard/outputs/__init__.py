"""Deckyard's output formats in one place: one module per format behind one interface
(`interface.OutputFormat`), and `OUTPUTS`, the one registry the CLI, the API and the deck
jobs look formats up in. Adding a format means its module and one line here.

The registry holds the formats `deck.export` makes: the PDF (from the printed deck) and the
PPTX (from the rendered pages and their layouts). PNGs and the site ZIP are still made by
their own deck jobs (`deck.screenshots`, `deck.build`).
"""

from __future__ import annotations

from deckyard.outputs.interface import (
    SLIDE_ANCHOR_PREFIX,
    DeckInput,
    Needs,
    OutputFile,
    OutputFormat,
    PageInput,
    Printed,
)
from deckyard.outputs.pdf import PDF
from deckyard.outputs.pptx import PPTX

OUTPUTS: dict[str, OutputFormat] = {PDF.name: PDF, PPTX.name: PPTX}
"""Every registered output format, by name (the first is the export's default)."""

__all__ = [
    "OUTPUTS",
    "SLIDE_ANCHOR_PREFIX",
    "DeckInput",
    "Needs",
    "OutputFile",
    "OutputFormat",
    "PageInput",
    "Printed",
]
