"""`deckyard import` and `deckyard init` as functions: the deck folders they write."""

from __future__ import annotations

import shutil
from pathlib import Path

from deckyard.decks.compile.documents import compile_deck_report
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.importer import import_markdown_deck, init_deck
from deckyard.decks.source.limits import DeckLimits

FIXTURES = Path(__file__).parents[3] / "fixtures" / "markdown_decks"


def test_import_writes_a_deck_folder_that_compiles_and_lists_what_it_left(
    tmp_path: Path, limits: DeckLimits
) -> None:
    source = tmp_path / "src"
    shutil.copytree(FIXTURES, source)
    (source / "images").mkdir()
    shutil.copyfile(FIXTURES / "assets/square.png", source / "images/pic.png")
    with (source / "slidev.md").open("a") as talk:
        talk.write("\n---\n\n![pic](images/pic.png) ![far](https://example.org/a.png)\n")
    dest = tmp_path / "deck"
    report = import_markdown_deck(source / "slidev.md", dest, limits)
    assert len(report.pages) == 5
    assert report.copied == ["assets/square.png", "assets/images/pic.png"]
    assert any("Counter" in item for item in report.not_carried)
    assert any("remote https://example.org/a.png" in item for item in report.not_carried)
    assert "](assets/images/pic.png)" in (dest / "pages/slide-05.md").read_text()
    assert not any("dySource" in p.read_text() for p in (dest / "pages").iterdir())
    deck = load_deck_folder(dest, limits)
    assert [p.name for p in deck.pages][:2] == ["slide-01", "slide-02"]
    problems = compile_deck_report(deck, limits).problems
    assert [p.reference for p in problems] == ["https://example.org/a.png"]


def test_init_writes_a_deck_that_compiles(tmp_path: Path, limits: DeckLimits) -> None:
    written = init_deck(tmp_path / "new", 'A "quoted" title')
    assert "deck.toml" in written
    deck = load_deck_folder(tmp_path / "new", limits)
    assert deck.manifest.title == 'A "quoted" title'
    assert compile_deck_report(deck, limits).problems == []
