"""reveal.js `data-markdown` sections cut into slides as reveal.js's Markdown plugin cuts them."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup

from deckyard.config import Settings
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.reveal_html import reveal_page_notes, reveal_slides
from deckyard.decks.source.reveal_markdown import slidify
from tests.helpers.reveal import MARKDOWN_FIXTURE, reveal_deck


def test_three_newlines_cut_slides_and_two_cut_a_stack_as_in_reveal_js() -> None:
    text = (MARKDOWN_FIXTURE / "example.md").read_text()
    pieces = slidify(text, r"^\n\n\n", r"^\n\n")
    shape = [len(p) if isinstance(p, list) else 0 for p in pieces]
    assert shape == [0, 2, 0, 2]  # a slide, a stack of two, a slide, a stack of two
    assert "Content 1.1" in pieces[1][0] and "Note:" in pieces[1][0]
    assert slidify("a\n---\nb\n---\nc", r"\r?\n---\r?\n", None) == ["a", "b", "c"]
    assert slidify("no separator", r"\r?\n---\r?\n", None) == ["no separator"]


def test_a_reveal_markdown_deck_has_its_eight_slides_and_their_notes(tmp_path: Path) -> None:
    limits = DeckLimits.from_settings(Settings.load())
    deck = load_deck_folder(reveal_deck(tmp_path / "md", MARKDOWN_FIXTURE), limits)
    assert len(deck.pages) == 8  # not one slide with everything after `Note:` in its notes
    notes = [reveal_page_notes(p.text) for p in deck.pages]
    assert notes[1] == ["This will only appear in the speaker notes window."]
    assert notes[6] == ["inline notes"]
    assert sum(1 for n in notes if n) == 2
    assert not any("data-markdown" in w.message for w in deck.warnings)
    soup = BeautifulSoup(deck.pages[0].text, "html5lib")
    positions = [(h, v) for h, v, _s in reveal_slides(soup)]
    assert positions == [(0, 0), (1, 0), (1, 1), (2, 0), (3, 0), (3, 1), (4, 0), (5, 0)]


def test_a_missing_markdown_file_is_a_warning_and_one_slide(tmp_path: Path) -> None:
    folder = reveal_deck(tmp_path / "md", MARKDOWN_FIXTURE)
    (folder / "example.md").unlink()
    deck = load_deck_folder(folder, DeckLimits.from_settings(Settings.load()))
    assert len(deck.pages) == 3  # the external section, and the inline one's two slides
    assert any("no file example.md" in w.message for w in deck.warnings)


def test_the_slide_size_given_to_reveal_initialize_is_the_decks(tmp_path: Path) -> None:
    folder = reveal_deck(tmp_path / "md", MARKDOWN_FIXTURE)
    html = (folder / "index.html").read_text()
    sized = "Reveal.initialize({ width: 1280, height: 720, plugins: [RevealMarkdown] });"
    (folder / "index.html").write_text(
        html.replace("Reveal.initialize({ plugins: [RevealMarkdown] });", sized)
    )
    deck = load_deck_folder(folder, DeckLimits.from_settings(Settings.load()))
    assert (deck.width, deck.height) == (1280, 720)
