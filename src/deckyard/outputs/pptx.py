"""`pptx`: the deck as a PowerPoint file, editable where the page allows it, else pictures.

The format itself is light (the CLI reads the registry before anything heavy is imported);
python-pptx is imported when a file is built (`pptx_build`, which says how slides are made).
"""

from __future__ import annotations

import asyncio

from deckyard.outputs.interface import DeckInput, Needs, OutputFile, Verify

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


class PptxFormat:
    """`pptx`: one slide per page, with speaker notes and a per-slide report."""

    name = "pptx"
    file_name = "deck.pptx"
    media_type = MEDIA_TYPE
    needs = Needs.PAGE_LAYOUTS
    verify = Verify.NONE
    stepped = True
    picture = None
    unpacked = None

    async def make(self, deck: DeckInput) -> OutputFile:
        """Build the PPTX in a thread (python-pptx and Pillow are blocking and CPU-bound)."""
        from deckyard.outputs.pptx_build import build_pptx

        return await asyncio.to_thread(build_pptx, deck)


PPTX = PptxFormat()
