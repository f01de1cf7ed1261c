"""`zip`: the deck as a static site ZIP that works from `file://` (`site_build` says what is in
it), from the compiled pages with no render (`Needs.COMPILED`).

The deck job then checks the ZIP as a site (`Verify.SITE`: a safe extraction against its
manifest, then its `index.html` loaded in Chromium) before it stores it; a publish puts that
file online. Steps do not apply: the site's viewer plays a slide's steps itself.
"""

from __future__ import annotations

import asyncio

from deckyard.outputs.interface import DeckInput, Needs, OutputFile, Verify

ZIP_MEDIA_TYPE = "application/zip"


class SiteFormat:
    """`zip`: `index.html` (viewer), `presenter.html`, a document per page, `manifest.json`."""

    name = "zip"
    file_name = "site.zip"
    media_type = ZIP_MEDIA_TYPE
    needs = Needs.COMPILED
    verify = Verify.SITE
    stepped = False
    picture = None
    unpacked = None

    async def make(self, deck: DeckInput) -> OutputFile:
        """Build the ZIP in a thread (it deflates every page document)."""
        from deckyard.outputs.site_build import build_site

        if not deck.compiled:
            raise ValueError("the zip format builds from the compiled pages (Needs.COMPILED)")
        data = await asyncio.to_thread(build_site, deck.title, deck.compiled, deck.version)
        return OutputFile(data)


SITE = SiteFormat()
