"""Step-aware export: a page per step of each slide, in the source tool's order, numbered as
its slide (reveal.js fragments, Marp fragmented lists, Slidev clicks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from bs4.element import Tag

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck, compile_print_document
from deckyard.decks.compile.step_timing import (
    reveal_fragment_count,
    slidev_timings,
    step_count,
)
from deckyard.decks.compile.steps import split_step, step_deck
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.marp_engine import marp_available
from tests.helpers.reveal import reveal_deck

STEPS = Path(__file__).parents[3] / "fixtures" / "steps"
NAMES = ["slide-01", "slide-02", "slide-02.step-1", "slide-02.step-2", "slide-02.step-3"]


@pytest.fixture(scope="module")
def limits() -> DeckLimits:
    return DeckLimits.from_settings(Settings.load())


def _hidden(document: str) -> list[str]:
    """The texts of the elements a compiled page hides until a later step."""
    soup = BeautifulSoup(document, "html5lib")
    hidden = soup.select('[style*="visibility: hidden !important"]')
    return [" ".join(t.get_text(" ", strip=True).split()) for t in hidden]


def _slide_root(document: str) -> Tag:
    root = BeautifulSoup(document, "html5lib").select_one("div.slide")
    assert root is not None
    return root


def test_a_marp_fragmented_list_is_one_step_an_item_numbered_as_its_slide(
    limits: DeckLimits,
) -> None:
    if not marp_available():
        pytest.fail("Marp's engine is not installed: run scripts/setup")
    deck = load_deck_folder(STEPS / "marp.md", limits)
    stepped = step_deck(deck, limits)
    assert [p.name for p in stepped.pages] == [*NAMES, "slide-03"]
    pages = compile_deck(stepped, limits)
    agenda = pages[1:5]
    assert [_hidden(p.document) for p in agenda] == [
        ["First", "Second", "Third"],
        ["Second", "Third"],
        ["Third"],
        [],
    ]
    # Marp's own page number (paginate: true) and the slide's number count slides
    for page in agenda:
        assert re.findall(r'data-marpit-pagination="(\d+)"', page.document) == ["2"]
        assert _slide_root(page.document)["data-number"] == "2"
    assert _slide_root(pages[5].document)["data-number"] == "3"
    # the last slide's plain list is not fragmented: no steps, nothing hidden
    assert _hidden(pages[5].document) == []


def test_slidev_clicks_follow_slidevs_order(limits: DeckLimits) -> None:
    deck = load_deck_folder(STEPS / "slidev.md", limits)
    stepped = step_deck(deck, limits)
    assert [p.name for p in stepped.pages] == [*NAMES, "slide-02.step-4", "slide-03"]
    pages = compile_deck(stepped, limits)
    shown = ["First", "Second", "Third", "Closing remark", "With the remark"]
    # <v-clicks>: an item a click; v-click: the next click; <v-after>: with it
    expected = [shown, shown[1:], shown[2:], shown[3:], []]
    assert [_hidden(p.document) for p in pages[1:6]] == expected
    assert {_slide_root(p.document)["data-number"] for p in pages[1:6]} == {"2"}


def test_reveal_fragments_are_steps_of_reveal_js_own_order(
    tmp_path: Path, limits: DeckLimits
) -> None:
    deck = load_deck_folder(reveal_deck(tmp_path / "talk", STEPS / "reveal"), limits)
    soup = BeautifulSoup(deck.pages[0].text, "html5lib")
    agenda = soup.select("section")[1]
    # index 1 (two fragments together), index 2, then the fragment without an index
    assert reveal_fragment_count(agenda) == 3
    stepped = step_deck(deck, limits)
    assert [p.name for p in stepped.pages] == [*NAMES, "slide-03"]
    pages = compile_deck(stepped, limits)
    gone_to = [re.findall(r"Reveal\.slide\(at\[0\], at\[1\], (-?\d+)\)", p.document) for p in pages]
    # reveal.js itself shows the fragments up to f (-1: none), fragments switched on
    assert gone_to == [["-1"], ["-1"], ["0"], ["1"], ["2"], ["-1"]]
    assert all("fragments: true" in p.document for p in pages)
    printed = compile_print_document(stepped, limits)
    assert "pdfSeparateFragments: true" in printed
    # without steps the deck is as before: fragments off, all of a slide shows
    plain = compile_deck(deck, limits)
    assert all("fragments: false" in p.document for p in plain)
    assert "pdfSeparateFragments: false" in compile_print_document(deck, limits)


def test_fragments_in_a_data_markdown_slide_are_counted() -> None:
    soup = BeautifulSoup(
        '<section data-markdown><script type="text/template">\n'
        '- one <!-- .element: class="fragment" data-fragment-index="1" -->\n'
        '- two <!-- .element: class="fragment" data-fragment-index="1" -->\n'
        '<p class="fragment">three</p>\n'
        "</script></section>",
        "html5lib",
    )
    section = soup.find("section")
    assert isinstance(section, Tag)
    assert reveal_fragment_count(section) == 2


def test_slidev_absolute_relative_and_hide_timings() -> None:
    soup = BeautifulSoup(
        "<div v-click id=a></div>"
        "<div v-click=\"'+2'\" id=b></div>"
        '<div v-click="1" id=c></div>'
        "<div v-after id=d></div>"
        "<v-click hide id=e></v-click>"
        "<div v-click.hide id=f></div>",
        "html5lib",
    )
    timed = {str(t.tag["id"]): (t.at, t.hide) for t in slidev_timings(soup)}
    assert timed == {
        "a": (1, False),
        "b": (3, False),
        "c": (1, False),  # absolute: at click 1, the count goes on from 3
        "d": (3, False),
        "e": (4, True),
        "f": (5, True),
    }
    assert step_count(slidev_timings(soup)) == 5


def test_the_stepped_pdf_has_a_page_per_step_and_an_anchor_per_slide(
    limits: DeckLimits,
) -> None:
    deck = load_deck_folder(STEPS / "slidev.md", limits)
    printed = compile_print_document(step_deck(deck, limits), limits)
    roots = BeautifulSoup(printed, "html5lib").select("div.slide")
    assert [r["data-number"] for r in roots] == ["1", "2", "2", "2", "2", "2", "3"]
    assert [r.get("id") for r in roots if r.get("id")] == ["slide-1", "slide-2", "slide-3"]
    unstepped = compile_print_document(deck, limits)
    assert "data-step" not in unstepped
    assert len(BeautifulSoup(unstepped, "html5lib").select("div.slide")) == 3


def test_a_stepped_deck_is_not_stepped_twice_and_keeps_its_marks(limits: DeckLimits) -> None:
    deck: DeckSource = load_deck_folder(STEPS / "slidev.md", limits)
    stepped = step_deck(deck, limits)
    assert step_deck(stepped, limits) is stepped
    marks = [split_step(p)[1] for p in stepped.pages]
    assert [(m.step, m.count, m.number) for m in marks if m] == [
        (0, 0, 1),
        (0, 4, 2),
        (1, 4, 2),
        (2, 4, 2),
        (3, 4, 2),
        (4, 4, 2),
        (0, 0, 3),
    ]
    assert [split_step(p)[0].text for p in stepped.pages[1:6]] == [deck.pages[1].text] * 5
