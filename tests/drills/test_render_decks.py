"""Compiled decks of each convention rendered by a real renderer: the pixels a user would see."""

from __future__ import annotations

from pathlib import Path

import pytest

from deckyard.config import Settings
from deckyard.decks.compile.documents import CompiledPage, compile_deck
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from tests.drills.support import RendererProcess, decode_png

pytestmark = pytest.mark.chromium

FIXTURES = Path(__file__).parents[1] / "fixtures"
Image = tuple[int, int, list[bytes], int]


@pytest.fixture
def limits() -> DeckLimits:
    return DeckLimits.from_settings(Settings.load())


def _render(renderer: RendererProcess, page: CompiledPage) -> Image:
    """The page rendered as its page job does: the document alone, default waits."""
    body = {"document": page.document, "width": page.width, "height": page.height}
    response = renderer.client.post("/v1/render", json=body)
    assert response.status_code == 200, response.text
    return decode_png(response.content)


def _count(image: Image, colour: tuple[int, int, int], tolerance: int = 6) -> int:
    width, _height, rows, channels = image
    found = 0
    for row in rows:
        for x in range(width):
            px = row[x * channels : x * channels + 3]
            if all(abs(px[i] - colour[i]) <= tolerance for i in range(3)):
                found += 1
    return found


def test_a_mermaid_fence_is_drawn_as_a_diagram_not_shown_as_code(
    renderer: RendererProcess, limits: DeckLimits
) -> None:
    deck = load_deck_folder(FIXTURES / "markdown_decks" / "slidev.md", limits)
    image = _render(renderer, compile_deck(deck, limits)[3])
    assert image[:2] == (1920, 1080)
    assert _count(image, (40, 37, 61)) > 1000  # mermaid's node outlines
    assert _count(image, (243, 245, 248), tolerance=1) < 100  # no code block (~10^5 px)
