"""The built site's presenter view in a real Chromium: notes, position, two-way navigation."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.outputs.site_build import build_site
from deckyard.render.renderer.browser.pool import find_chromium

pytestmark = pytest.mark.chromium

TALK = Path(__file__).parents[2] / "examples" / "talk.md"


async def test_presenter_view_follows_the_viewer_and_drives_it(tmp_path: Path) -> None:
    settings = Settings.load()
    limits = DeckLimits.from_settings(settings)
    deck = load_deck_folder(TALK, limits)
    site = build_site(deck.manifest.title, compile_deck(deck, limits))
    zipfile.ZipFile(io.BytesIO(site)).extractall(tmp_path)
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=find_chromium(settings, p.chromium.executable_path)
        )
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 720})
            viewer = await context.new_page()
            await viewer.goto((tmp_path / "index.html").as_uri())
            async with context.expect_page() as opened:
                await viewer.keyboard.press("p")
            presenter = await opened.value
            await presenter.wait_for_load_state()
            notes = presenter.locator("#notes")
            await notes.get_by_text("Speaker notes: everything in a comment").wait_for()
            await viewer.keyboard.press("ArrowRight")
            await viewer.keyboard.press("ArrowRight")
            await presenter.locator("#pos").get_by_text("3 / 3").wait_for()
            assert "Notes in comments work on every slide" in await notes.inner_text()
            await presenter.keyboard.press("ArrowLeft")
            await viewer.locator("#pos").get_by_text("2 / 3").wait_for()
        finally:
            await browser.close()
