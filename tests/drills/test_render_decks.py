"""Compiled decks of each convention rendered by a real renderer: the pixels a user would see."""

from __future__ import annotations

from pathlib import Path

import pytest

from deckyard.config import Settings
from deckyard.decks.compile.documents import CompiledPage, compile_deck
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from tests.drills.support import RendererProcess, decode_png, ink, pixel
from tests.helpers.reveal import reveal_deck

pytestmark = pytest.mark.chromium

FIXTURES = Path(__file__).parents[1] / "fixtures"
Image = tuple[int, int, list[bytes], int]


@pytest.fixture
def limits() -> DeckLimits:
    return DeckLimits.from_settings(Settings.load())


def _render(renderer: RendererProcess, page: CompiledPage) -> Image:
    """The page rendered as its page job does: the document alone, default waits.

    The deadline is generous: parsing mermaid's 5.5 MB bundle takes seconds on a busy machine.
    """
    body = {"document": page.document, "width": page.width, "height": page.height}
    body["timeout_seconds"] = 120
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


SIZED_DECK = """---
theme: uncover
width: {width}
height: {height}
paginate: true
footer: a footer
---

## A list and code

- First point with `inline code`
- Second point, a little longer to see how it wraps across the slide width
- 日本語のテキスト and emoji :tada:

```js
const sum = (a, b) => a + b;
```

| Name | Value |
|------|-------|
| a    | 1     |
"""


def test_a_builtin_theme_looks_the_same_at_1280x720_and_1920x1080(
    renderer: RendererProcess, limits: DeckLimits, tmp_path: Path
) -> None:
    ink_share = []
    for width, height in ((1280, 720), (1920, 1080)):
        talk = tmp_path / f"talk-{width}.md"
        talk.write_text(SIZED_DECK.format(width=width, height=height))
        [page] = compile_deck(load_deck_folder(talk, limits), limits)
        image = _render(renderer, page)
        assert image[:2] == (width, height)
        ink_share.append(ink(image) / (width * height))
    small, large = ink_share
    assert small > 0.01  # text, code and table were drawn
    assert abs(small - large) / large < 0.2, ink_share  # type scales with the slide


def test_a_reveal_js_deck_renders_each_slide_through_reveal_js_with_its_theme(
    renderer: RendererProcess, limits: DeckLimits, tmp_path: Path
) -> None:
    deck = load_deck_folder(reveal_deck(tmp_path / "talk"), limits)
    pages = compile_deck(deck, limits)
    assert len(pages) == 4
    images = [_render(renderer, page) for page in pages]
    assert all(image[:2] == (960, 700) for image in images)
    black, coloured = (25, 25, 25), (29, 53, 87)  # the black theme; data-background-color
    assert pixel(images[0], 10, 10) == black and pixel(images[3], 10, 10) == coloured
    assert all(_count(image, (255, 255, 255), tolerance=20) > 500 for image in images)
    assert _count(images[2], (220, 80, 40), tolerance=40) > 150 * 150  # the data-src image
    assert _count(images[1], (220, 80, 40), tolerance=40) == 0  # each PNG its own slide
