"""Deckyard's output formats in one place: one module per format behind one interface
(`interface.OutputFormat`), and `OUTPUTS`, the one registry the CLI, the API and the deck
jobs look formats up in. Adding a format means its module and one line here.

Today the registry holds the formats built from rendered pages (PPTX); PNG, PDF and the site
ZIP are still made by their deck jobs directly and move here in a later change.
"""

from __future__ import annotations

from deckyard.outputs.interface import DeckInput, Needs, OutputFile, OutputFormat, PageInput
from deckyard.outputs.pptx import PPTX

OUTPUTS: dict[str, OutputFormat] = {PPTX.name: PPTX}
"""Every registered output format, by name."""

__all__ = ["OUTPUTS", "DeckInput", "Needs", "OutputFile", "OutputFormat", "PageInput"]
