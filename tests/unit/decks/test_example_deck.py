"""The example deck in `examples/launch-deck` loads, compiles cleanly and stays small."""

from __future__ import annotations

from pathlib import Path

import pytest

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck_report, compile_print_document
from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.deck_source import DeckSource, PageKind
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits, ZipLimits
from deckyard.decks.validation.result import StageStatus
from deckyard.decks.validation.rules import (
    compile_outcome,
    is_validation_passed,
    render_outcome_from_diagnostics,
    validation_result,
)
from deckyard.outputs.site_build import build_site
from deckyard.render.protocol import Diagnostics

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "launch-deck"
OVERFLOW_PAGE = "05-fine-print"


@pytest.fixture(scope="module")
def deck() -> DeckSource:
    return load_deck_folder(EXAMPLE, DeckLimits.from_settings(Settings.load()))


def test_example_is_small_and_mixes_markdown_html_fonts_images(deck: DeckSource) -> None:
    total = sum(p.stat().st_size for p in EXAMPLE.rglob("*") if p.is_file())
    assert total < 1024 * 1024
    assert len(deck.pages) >= 4
    assert {p.kind for p in deck.pages} == {PageKind.HTML, PageKind.MARKDOWN}
    assert deck.manifest.fonts and deck.manifest.fonts[0].file in deck.assets
    assert any(a.media_type == "image/png" for a in deck.assets.values())
    assert any(a.media_type == "image/svg+xml" for a in deck.assets.values())
    text = "".join(p.text for p in deck.pages)
    assert "谢谢" in text and "🚀" in text


def test_example_compiles_with_zero_problems(deck: DeckSource, limits: DeckLimits) -> None:
    report = compile_deck_report(deck, limits)
    assert report.problems == []
    assert [p.name for p in report.pages] == [p.name for p in deck.pages]
    for page in report.pages:
        assert 'font-family: "Launch Display"' in page.document
        assert "http://" not in page.document and "https://" not in page.document
        assert 'src="assets/' not in page.document and "url(assets/" not in page.document
    print_doc = compile_print_document(deck, limits)
    assert print_doc.count('<div class="slide') == len(deck.pages)


def test_overflow_is_left_to_the_renderer(deck: DeckSource, limits: DeckLimits) -> None:
    report = compile_deck_report(deck, limits)
    stages = {p.name: compile_outcome(report.problems_of(p.name)) for p in deck.pages}
    assert all(o.stage.status is StageStatus.PASSED for o in stages.values())
    assert OVERFLOW_PAGE in stages
    overflow = Diagnostics(overflow=["p at 128,1130 1664x168 (outside viewport)"])
    result = validation_result(
        stages[OVERFLOW_PAGE], render_outcome_from_diagnostics(overflow), page=OVERFLOW_PAGE
    )
    assert result.stages.render.status is StageStatus.WARNING
    assert is_validation_passed(result)


def test_example_site_verifies(deck: DeckSource, limits: DeckLimits) -> None:
    pages = compile_deck_report(deck, limits).pages
    site = build_site(deck.manifest.title, pages, version="example")
    check = verify_site_zip(
        site,
        ZipLimits(max_entries=50, max_total_bytes=64 * 1024 * 1024, max_file_bytes=8 * 1024 * 1024),
    )
    assert check.page_count == len(deck.pages)
