"""Markdown rendering keeps the Markdown line of every image, link and raw HTML element."""

from __future__ import annotations

from bs4 import BeautifulSoup

from deckyard.decks.compile.markdown import LINE_ATTR, MARKER_TAG, render_markdown

TEXT = (
    "# Title\n"  # 1
    "\n"  # 2
    "Intro with [a link](https://x.example)\n"  # 3
    "and ![an image](assets/a.png) on a soft break.\n"  # 4
    "\n"  # 5
    '<div class="raw">\n'  # 6
    "  <img src=assets/b.png>\n"  # 7
    "</div>\n"  # 8
    "\n"  # 9
    'Inline <span id="s">raw</span> html.\n'  # 10
)


def test_images_and_links_carry_their_markdown_line() -> None:
    soup = BeautifulSoup(render_markdown(TEXT, html=True, extensions=()), "html.parser")
    assert soup.find("a")[LINE_ATTR] == "3"  # type: ignore[index]
    assert soup.find("img", src="assets/a.png")[LINE_ATTR] == "4"  # type: ignore[index]


def test_raw_html_is_preceded_by_a_marker_of_its_first_line() -> None:
    soup = BeautifulSoup(render_markdown(TEXT, html=True, extensions=()), "html.parser")
    markers = [int(m["n"]) for m in soup.find_all(MARKER_TAG)]  # type: ignore[arg-type]
    assert markers[0] == 6
    assert 10 in markers
    block = soup.find(MARKER_TAG, n="6")
    assert block is not None
    assert block.find_next("div")["class"] == ["raw"]  # type: ignore[index]
    assert not soup.find("img", src="assets/b.png").has_attr(LINE_ATTR)  # type: ignore[union-attr]


def test_without_html_raw_html_is_escaped_and_unmarked() -> None:
    out = render_markdown(TEXT, html=False, extensions=())
    assert f"<{MARKER_TAG}" not in out
    assert "&lt;div" in out


def test_extensions_are_enabled_on_request() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert "<table>" not in render_markdown(table, html=False, extensions=())
    assert "<table>" in render_markdown(table, html=False, extensions=("table",))
