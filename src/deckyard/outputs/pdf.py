"""`pdf`: the deck as one PDF, a printed page per slide, made navigable.

Chromium prints the deck's print document (the deck job renders it: `Needs.PRINTED`); this
format then writes the outline, the slide links and the metadata into it
(`pdf_navigation`, pikepdf, imported when a file is built) and warns when the file passes its
size budget.
"""

from __future__ import annotations

import asyncio

from deckyard.outputs.interface import DeckInput, Needs, OutputFile, Verify


class PdfFormat:
    """`pdf`: Chromium's print of the deck, with an outline, slide links and metadata."""

    name = "pdf"
    file_name = "deck.pdf"
    media_type = "application/pdf"
    needs = Needs.PRINTED
    verify = Verify.NONE
    stepped = True
    picture = None
    unpacked = None

    async def make(self, deck: DeckInput) -> OutputFile:
        """Make the printed PDF navigable (in a thread: pikepdf rewrites the whole file)."""
        from deckyard.outputs.pdf_navigation import deck_outline, navigable_pdf, size_warning

        if deck.printed is None:
            raise ValueError("the pdf format builds from the printed deck (Needs.PRINTED)")
        facts = deck_outline(deck.printed.document, deck.title, deck.author, deck.lang)
        data = await asyncio.to_thread(navigable_pdf, deck.printed.pdf, facts)
        warning = size_warning(len(data), deck.slides, deck.budget_bytes_per_slide)
        return OutputFile(
            data,
            warnings=[warning] if warning is not None else [],
            facts={"outline": facts.slide_titles},
        )


PDF = PdfFormat()
