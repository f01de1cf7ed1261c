"""A web page shown in a reveal.js slide (an iframe background or an `<iframe>`) is left out with
a warning: renders have no network, and a page is not a file to fetch."""

from __future__ import annotations

from bs4 import BeautifulSoup

from deckyard.config import Settings
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.reveal_html import (
    LEFT_OUT_FRAME,
    deck_from_reveal_html,
    reveal_slides,
    without_remote_frames,
)

DECK = """<html><head><title>Frames</title></head><body>
<div class="reveal"><div class="slides">
<section><h1>One</h1></section>
<section data-background-iframe="https://hakim.se" data-background-interactive>
  <h2>Iframe background</h2>
</section>
<section>
  <section><h2>Local</h2><iframe src="page.html"></iframe></section>
  <section><h2>Remote</h2>
    <iframe src="//example.com/embed" width="400"></iframe></section>
</section>
</div></div></body></html>"""


def test_remote_frames_are_left_out_with_the_slide_and_line() -> None:
    soup = BeautifulSoup(DECK, "html5lib")
    text, warnings = without_remote_frames(DECK, reveal_slides(soup), soup, "index.html")
    assert [(w.line, w.slide) for w in warnings] == [(4, 2), (10, 4)]
    assert "https://hakim.se" in warnings[0].message and "iframe background" in warnings[0].message
    assert "//example.com/embed" in warnings[1].message and "<iframe>" in warnings[1].message
    assert text.count("\n") == DECK.count("\n")  # lines keep their numbers
    assert 'data-background-iframe="https' not in text and 'src="//example' not in text
    assert f'{LEFT_OUT_FRAME}="https://hakim.se" data-background-interactive' in text
    assert '<iframe src="page.html">' in text  # a file of the deck is not a web page


def test_a_deck_with_a_remote_frame_loads_with_its_warning() -> None:
    deck = deck_from_reveal_html(
        DECK, {"page.html": b"<p>local</p>"}, DeckLimits.from_settings(Settings.load())
    )
    assert len(deck.pages) == 4
    assert all('data-background-iframe="https' not in p.text for p in deck.pages)
    left_out = [w for w in deck.warnings if "left out" in w.message]
    assert [w.describe().split(":")[0:2] for w in left_out] == [
        ["index.html", "4 (slide 2)"],
        ["index.html", "10 (slide 4)"],
    ]


def test_a_deck_without_remote_frames_is_unchanged() -> None:
    plain = DECK.replace("https://hakim.se", "bg.html").replace("//example.com/embed", "x.html")
    soup = BeautifulSoup(plain, "html5lib")
    assert without_remote_frames(plain, reveal_slides(soup), soup, "index.html") == (plain, [])
