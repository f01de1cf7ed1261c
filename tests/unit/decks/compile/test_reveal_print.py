"""A reveal.js deck's PDF holds the slides its pages hold: a slide that failed (left out of the
deck the PDF is made from) is hidden in reveal.js's print view, as an author hides one."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck_report, compile_print_document
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.reveal_html import reveal_slides
from tests.helpers.reveal import reveal_deck


def _hidden(document: str) -> list[str]:
    soup = BeautifulSoup(document, "html5lib")
    return [
        str(s.find(["h1", "h2"]).get_text()) if s.find(["h1", "h2"]) else "(stack)"
        for s in soup.select("section[data-visibility=hidden]")
    ]


def test_the_print_view_leaves_out_the_slides_the_deck_left_out(tmp_path: Path) -> None:
    limits = DeckLimits.from_settings(Settings.load())
    deck = load_deck_folder(reveal_deck(tmp_path / "talk"), limits)
    every = compile_print_document(deck, limits)
    assert _hidden(every) == []
    soup = BeautifulSoup(deck.pages[0].text, "html5lib")
    titles = [s.find(["h1", "h2"]) for _, _, s in reveal_slides(soup)]
    assert len(deck.pages) == len(titles) >= 3

    # the second page failed: the PDF is made from the others
    kept = deck.model_copy(update={"pages": [deck.pages[0], *deck.pages[2:]]})
    second = titles[1]
    assert second is not None
    assert _hidden(compile_print_document(kept, limits)) == [second.get_text()]


def test_a_broken_reference_fails_only_its_own_slide_and_the_pdf_keeps_the_rest(
    tmp_path: Path,
) -> None:
    """Every page of a reveal.js deck is the whole HTML; a missing image in slide 2 is slide
    2's problem alone (it failed all of them), and the print view of the others compiles."""
    folder = reveal_deck(tmp_path / "talk")
    html = (folder / "index.html").read_text()
    first = html.index("<section", html.index('class="slides"'))
    second = html.index("<section", first + 1)
    broken = '<section><h2>Broken</h2><img src="nothere.png" alt="x"></section>'
    (folder / "index.html").write_text(html[:second] + broken + html[second:])
    limits = DeckLimits.from_settings(Settings.load())
    deck = load_deck_folder(folder, limits)

    report = compile_deck_report(deck, limits)
    assert sorted({p.page for p in report.problems}) == [deck.pages[1].name]
    other = next(p for p in report.pages if p.name == deck.pages[2].name)
    assert "nothere.png" not in other.document

    kept = deck.model_copy(update={"pages": [deck.pages[0], *deck.pages[2:]]})
    assert _hidden(compile_print_document(kept, limits)) == ["Broken"]
