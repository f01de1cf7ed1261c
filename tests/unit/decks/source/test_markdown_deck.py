"""One-file Markdown decks: slides, directives, notes and warnings in each convention."""

from __future__ import annotations

from pathlib import Path

import pytest

from deckyard.decks import diagrams
from deckyard.decks.source.markdown_deck import Convention, MarkdownDeckError, parse_markdown_deck

FIXTURES = Path(__file__).parents[3] / "fixtures" / "markdown_decks"


def _deck(name: str):  # type: ignore[no-untyped-def]
    return parse_markdown_deck((FIXTURES / name).read_text())


def _warnings(name: str) -> list[tuple[int, int | None, str]]:
    return [(w.line, w.slide, w.message) for w in _deck(name).warnings]


def test_marp_deck_splits_on_rulers_and_resolves_directives() -> None:
    deck = _deck("marp.md")
    assert deck.convention is Convention.MARP
    assert len(deck.slides) == 4
    first, second, third, fourth = deck.slides
    assert first.directives["class"] == "lead"
    assert first.directives["paginate"] is False
    assert first.notes == ["Speaker note for the title slide."]
    # `_class` is this slide only; `header`/`backgroundColor` apply from slide 2 on.
    assert "class" not in second.directives
    assert second.directives["header"] == "Code and math"
    assert second.directives["backgroundColor"] == "#fdf6e3"
    assert third.directives["header"] == "Code and math"
    assert third.notes == ["A longer note,\non two lines."]
    assert fourth.directives["class"] == "invert"
    assert all(s.directives["footer"] == "Deckyard fixture" for s in deck.slides)
    assert [s.first_line for s in deck.slides] == [7, 18, 32, 50]


def test_marp_fit_is_a_warning_with_slide_and_line() -> None:
    assert _warnings("marp.md") == [
        (54, 4, "Marp's <!--fit--> is not supported; the heading keeps its size")
    ]


def test_slidev_deck_reads_per_slide_front_matter() -> None:
    deck = _deck("slidev.md")
    assert deck.convention is Convention.SLIDEV
    assert [s.directives.get("layout") for s in deck.slides] == [
        "cover",
        "two-cols",
        "center",
        None,
    ]
    assert deck.slides[0].directives["background"] == "assets/square.png"
    assert deck.slides[2].directives["class"] == "text-center"
    assert deck.slides[0].notes == ["The last comment of a slide is its speaker note."]
    assert "layout:" not in deck.slides[1].text


def test_slidev_unsupported_constructs_are_warnings_naming_slide_and_line() -> None:
    found = _warnings("slidev.md")
    assert (42, 3, "Slidev clicks (v-click) are not animated; all content shows at once") in found
    assert (48, 3, "the Vue component <Counter> is not rendered; only its text shows") in found
    assert not any("Mermaid" in message for _, _, message in found)  # drawn, see below
    assert (1, None, "front matter 'highlighter' has no effect in Deckyard") in found


def test_reveal_deck_uses_its_separators_notes_and_slide_attributes() -> None:
    deck = _deck("reveal.md")
    assert deck.convention is Convention.REVEAL
    assert len(deck.slides) == 4
    assert deck.slides[0].notes == ["Say hello; this is the title slide's note."]
    assert deck.slides[1].directives == {"backgroundColor": "#1d3557"}
    assert deck.slides[3].directives["backgroundImage"] == 'url("assets/square.png")'
    assert deck.slides[3].directives["backgroundSize"] == "contain"
    assert deck.slides[3].notes == ["Notes after the content."]
    messages = [m for _, _, m in _warnings("reveal.md")]
    assert "vertical slides are shown in order" in messages
    assert "reveal.js `.element` attributes (fragments) are ignored" in messages


def test_a_ruler_inside_code_does_not_split() -> None:
    deck = parse_markdown_deck("# One\n\n```yaml\n---\nkey: value\n---\n```\n\n---\n\n# Two\n")
    assert len(deck.slides) == 2
    assert "key: value" in deck.slides[0].text


def test_custom_separator_and_heading_divider() -> None:
    deck = parse_markdown_deck("---\nseparator: <!--s-->\n---\n# A\n<!--s-->\n# B\n---\nstill B\n")
    assert [s.text.strip() for s in deck.slides] == ["# A", "# B\n---\nstill B"]
    divided = parse_markdown_deck("---\nheadingDivider: 2\n---\n# A\ntext\n## B\n## C\n### c\n")
    assert len(divided.slides) == 3


def test_plain_markdown_without_front_matter() -> None:
    deck = _deck("plain.md")
    assert deck.convention is Convention.PLAIN
    assert len(deck.slides) == 2
    assert deck.warnings == []


def test_bad_front_matter_names_its_line() -> None:
    with pytest.raises(MarkdownDeckError) as excinfo:
        parse_markdown_deck("---\ntitle: ok\nsize: [16:9\n---\n# A\n")
    assert excinfo.value.line >= 2


def test_page_text_carries_the_resolved_directives() -> None:
    deck = _deck("marp.md")
    text = deck.slides[1].page_text()
    assert text.rstrip().endswith("-->")
    assert '"_header": "Code and math"' in text


def test_without_the_mermaid_package_a_diagram_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(diagrams, "MERMAID_BUNDLE", tmp_path / "absent.js")
    diagrams.mermaid_bundle.cache_clear()
    try:
        found = _warnings("slidev.md")
    finally:
        diagrams.mermaid_bundle.cache_clear()
    assert (54, 4, "Mermaid diagrams are not rendered; the source shows as code") in found
