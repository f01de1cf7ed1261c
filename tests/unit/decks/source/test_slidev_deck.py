"""Slidev decks lose nothing without a word: front matter, imports, icons, classes, scripts."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest

from deckyard.decks.compile.slide_markdown import render_slide
from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_deck import MarkdownDeckError, parse_markdown_deck
from deckyard.decks.source.markdown_file import deck_from_markdown
from deckyard.decks.source.slidev_imports import slide_numbers
from deckyard.decks.source.zip_archive import load_deck_zip

DECK = Path(__file__).parents[3] / "fixtures" / "markdown_decks" / "slidev_deck"
HEAD = "---\ntheme: default\ntransition: slide-left\n---\n\n# One\n\n"


def _messages(text: str, files: dict[str, str] | None = None) -> list[tuple[int, int | None, str]]:
    deck = parse_markdown_deck(text, (files or {}).get)
    return [(w.line, w.slide, w.message) for w in deck.warnings]


def test_unknown_slide_front_matter_is_read_and_warned_about_once_per_slide() -> None:
    text = HEAD + "---\ndragPos:\n  square: 40,60,100,100\nclicks: 3\n---\n\n# Two\n"
    deck = parse_markdown_deck(text)
    assert [s.text.strip() for s in deck.slides] == ["# One", "# Two"]
    assert (9, 2, "slide front matter 'dragPos', 'clicks' has no effect in Deckyard; ignored") in [
        (w.line, w.slide, w.message) for w in deck.warnings
    ]
    assert sum("slide front matter" in w.message for w in deck.warnings) == 1


def test_known_and_unknown_keys_together_keep_the_known_ones() -> None:
    deck = parse_markdown_deck(HEAD + "---\nlayout: center\ntransition: fade\n---\n\n# Two\n")
    assert deck.slides[1].directives["layout"] == "center"
    assert "transition" not in deck.slides[1].text


def test_a_blank_line_after_the_separator_keeps_it_a_plain_separator() -> None:
    deck = parse_markdown_deck(HEAD + "---\n\nkey: value\n\n---\n\n# Three\n")
    assert [s.text.strip() for s in deck.slides] == ["# One", "key: value", "# Three"]
    assert deck.slides[1].directives == {}


def test_front_matter_that_is_not_yaml_stays_text_with_a_warning() -> None:
    deck = parse_markdown_deck(HEAD + "---\nlayout: [center\n---\n\n# Two\n")
    assert any("layout: [center" in s.text for s in deck.slides)
    assert any(
        w.line == 9 and "slide front matter is not valid YAML" in w.message for w in deck.warnings
    )


def test_block_front_matter_in_a_yaml_fence_is_read_as_settings() -> None:
    deck = parse_markdown_deck(HEAD + "---\n\n```yaml\nlayout: center\n```\n\n# Two\n")
    assert deck.slides[1].directives["layout"] == "center"
    assert "```" not in deck.slides[1].text


def test_src_imports_the_slides_of_the_file_with_front_matter_merged() -> None:
    files = {"pages/part.md": "---\nlayout: center\nclicks: 2\n---\n\n# A\n\n---\n\n# B\n"}
    text = HEAD + "---\nsrc: ./pages/part.md\nclass: lead\n---\n\n---\n\n# Last\n"
    deck = parse_markdown_deck(text, files.get)
    assert [s.text.strip() for s in deck.slides] == ["# One", "# A", "# B", "# Last"]
    a, b = deck.slides[1:3]
    assert a.directives["layout"] == "center" and a.directives["class"] == "lead"
    assert b.directives["class"] == "lead" and "layout" not in b.directives
    assert (a.file, a.first_line, b.file, b.first_line) == ("pages/part.md", 5, "pages/part.md", 9)
    assert '"_dySource": "pages/part.md:5"' in a.page_text("talk.md")
    warning = next(w for w in deck.warnings if "clicks" in w.message)
    assert (warning.file, warning.line, warning.slide) == ("pages/part.md", 2, 2)
    assert warning.describe("talk.md").startswith("pages/part.md:2 (slide 2): ")


def test_src_takes_the_slides_its_range_names() -> None:
    files = {"all.md": "# 1\n\n---\n\n# 2\n\n---\n\n# 3\n\n---\n\n# 4\n"}
    deck = parse_markdown_deck("# Own\n\n---\nsrc: /all.md#2,4-9\n---\n", files.get)
    assert [s.text.strip() for s in deck.slides] == ["# Own", "# 2", "# 4"]
    assert slide_numbers("2,5-7", 10) == [2, 5, 6, 7]
    assert slide_numbers("", 3) == [1, 2, 3]


def test_a_missing_import_is_an_error_naming_the_line() -> None:
    with pytest.raises(MarkdownDeckError) as excinfo:
        parse_markdown_deck(HEAD + "---\nsrc: ./pages/gone.md\n---\n")
    assert excinfo.value.line == 9 and excinfo.value.missing_import
    assert "pages/gone.md" in excinfo.value.message


def test_a_missing_import_is_a_deck_error_with_file_and_line(limits: DeckLimits) -> None:
    with pytest.raises(DeckSourceError) as excinfo:
        deck_from_markdown(HEAD + "---\nsrc: pages/gone.md\n---\n", "talk.md", {}, limits)
    assert excinfo.value.code is Code.PAGE_NOT_FOUND
    assert excinfo.value.message.startswith("talk.md:9: src: pages/gone.md")


def test_an_import_cycle_or_escape_is_an_error() -> None:
    files = {"a.md": "---\nsrc: ./a.md\n---\n"}
    with pytest.raises(MarkdownDeckError, match="imports itself"):
        parse_markdown_deck("# One\n\n---\nsrc: a.md\n---\n", files.get)
    with pytest.raises(MarkdownDeckError, match="outside the deck's folder"):
        parse_markdown_deck("# One\n\n---\nsrc: ../secret.md\n---\n", files.get)


def test_a_folder_deck_imports_from_beside_the_markdown_file(
    tmp_path: Path, limits: DeckLimits
) -> None:
    folder = tmp_path / "deck"
    shutil.copytree(DECK, folder)
    deck = load_deck_folder(folder / "slides.md", limits)
    assert [p.name for p in deck.pages] == [f"slide-0{i}" for i in range(1, 7)]
    assert "导入的第一页" in deck.pages[3].text and "导入的第二页" in deck.pages[4].text
    assert '"_dySource": "pages/imported.md:5"' in deck.pages[3].text
    assert not any(path.startswith("pages/") for path in deck.assets)


def test_a_zip_deck_imports_from_its_entries(limits: DeckLimits) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("talk/slides.md", "# One\n\n---\nsrc: ./parts/part.md\n---\n")
        archive.writestr("talk/parts/part.md", "# Imported\n")
    deck = load_deck_zip(buffer.getvalue(), limits)
    assert "# Imported" in deck.pages[1].text


def test_color_schema_dark_picks_the_dark_theme(limits: DeckLimits) -> None:
    # Without Slidev's packages (sourced=False, as `deckyard import` reads a deck), the
    # deck gets Deckyard's built-in themes; rendered, it gets Slidev's own (test_slidev_look).
    def theme(text: str) -> DeckSource:
        return deck_from_markdown(text, "talk.md", {}, limits, sourced=False)

    dark = theme("---\ncolorSchema: dark\n---\n# A\n")
    assert dark.theme_css.startswith('@import "dark"')
    assert not any("colorSchema" in w.message for w in dark.warnings)
    seriph = theme("---\ntheme: seriph\ncolorSchema: dark\n---\n# A\n")
    assert seriph.theme_css.startswith('@import "dark"')
    assert "Slidev's theme 'seriph' is shown with Deckyard's built-in 'dark' theme" in [
        w.message for w in seriph.warnings
    ]
    light = theme("---\ncolorSchema: light\n---\n# A\n")
    assert light.theme_css.startswith('@import "default"')


def test_vendored_icons_become_svg_and_others_are_left_out_with_a_warning() -> None:
    text = (
        "# Icons <carbon:logo-github /> <mdi-account-circle/>\n\n<uim-rocket />\n\n`<carbon-x />`\n"
    )
    page = render_slide(text, allow_html=True, extensions=())
    assert page.count("<svg") == 2 and "carbon:" not in page and "uim-rocket" not in page
    assert "&lt;carbon-x /&gt;" in page  # code stays code
    assert _messages("---\nlayout: center\n---\n" + text) == [
        (6, 1, "the icon uim:rocket is not available; it is left out")
    ]


def test_uno_css_utility_classes_are_one_warning_per_slide() -> None:
    body = '<div class="p-3 my-note">\n\n<b class="text-xl">x</b></div>\n'
    text = HEAD + "---\nclass: text-center\n---\n\n" + body
    assert (
        9,
        2,
        "UnoCSS utility classes have no effect in Deckyard: text-center, p-3, text-xl",
    ) in (_messages(text))


def test_a_vue_script_block_is_left_out_with_a_warning() -> None:
    text = HEAD + "---\n\n<script setup>\nimport { ref } from 'vue'\n</script>\n\n# {{ count }}\n"
    deck = parse_markdown_deck(text)
    assert "<script" not in deck.slides[1].text and "import" not in deck.slides[1].text
    found = [(w.line, w.slide, w.message) for w in deck.warnings]
    assert (10, 2, "Vue script is not run; the <script> block is left out") in found
    assert (14, 2, "Vue interpolation {{ count }} is not evaluated; it shows as written") in found
