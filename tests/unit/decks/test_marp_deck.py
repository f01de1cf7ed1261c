"""Marp decks converted by Marp's own engine (marp-core in Node), one page per `<section>`."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from deckyard.decks.compile.documents import (
    compile_deck,
    compile_deck_report,
    compile_print_document,
)
from deckyard.decks.errors import DeckSourceError, DeckSourceErrorCode
from deckyard.decks.source import marp_engine
from deckyard.decks.source.deck_source import DeckSource, PageKind
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.importer import import_markdown_deck
from deckyard.decks.source.limits import DeckLimits
from deckyard.outputs.site_presenter import page_notes

pytestmark = pytest.mark.processes  # each conversion runs Node

FRONT = "---\nmarp: true\n{extra}---\n\n"


def _deck(
    tmp_path: Path,
    body: str,
    limits: DeckLimits,
    extra: str = "",
    files: dict[str, str] | None = None,
) -> DeckSource:
    for name, text in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "talk.md").write_text(FRONT.format(extra=extra) + body)
    return load_deck_folder(tmp_path / "talk.md", limits)


def _documents(deck: DeckSource, limits: DeckLimits) -> list[str]:
    report = compile_deck_report(deck, limits)
    assert report.problems == []
    return [page.document for page in report.pages]


def test_each_section_is_one_html_page_at_marps_slide_size(
    tmp_path: Path, limits: DeckLimits
) -> None:
    deck = _deck(tmp_path, "# One\n\n---\n\n# Two\n\n---\n\n# Three\n", limits)
    assert [p.name for p in deck.pages] == ["slide-01", "slide-02", "slide-03"]
    assert all(p.kind is PageKind.HTML for p in deck.pages)
    assert (deck.width, deck.height) == (1280, 720)
    documents = _documents(deck, limits)
    for number, document in enumerate(documents, start=1):
        assert document.count("<section") == 1
        assert f'<section id="{number}"' in document
        assert 'viewBox="0 0 1280 720"' in document
    four_three = _deck(tmp_path, "# A\n", limits, extra="size: 4:3\n")
    assert (four_three.width, four_three.height) == (960, 720)


def test_a_global_style_in_slide_one_applies_to_every_slide(
    tmp_path: Path, limits: DeckLimits
) -> None:
    body = "<style>\nh2 { color: #ab0001; }\n</style>\n\n## One\n\n---\n\n## Two\n"
    documents = _documents(_deck(tmp_path, body, limits), limits)
    rule = re.compile(
        r"div\.marpit > svg > foreignObject > section :is\(h2, marp-h2\) \{color:#ab0001"
    )
    assert all(rule.search(document) for document in documents)


def test_single_newlines_are_line_breaks(tmp_path: Path, limits: DeckLimits) -> None:
    [document] = _documents(_deck(tmp_path, "line one\nline two\n", limits), limits)
    assert "line one<br>\nline two" in document


def test_a_builtin_theme_is_marps_own(tmp_path: Path, limits: DeckLimits) -> None:
    deck = _deck(tmp_path, "# A\n", limits, extra="theme: gaia\n")
    [document] = _documents(deck, limits)
    assert 'data-theme="gaia"' in document
    assert "--color-background:light-dark(#fff8e1, #455a64)" in document  # gaia's palette
    assert not any("built-in" in w.message for w in deck.warnings)
    assert [w.message for w in deck.warnings] == [
        "the theme's remote stylesheet https://fonts.bunny.net/css?family=Lato:400,900|"
        "Roboto+Mono:400,700&display=swap is not loaded (the renderer has no network); its "
        "fonts fall back to installed ones"
    ]


def test_a_custom_theme_may_import_a_builtin_and_be_chosen_by_name_or_path(
    tmp_path: Path, limits: DeckLimits
) -> None:
    theme = "/* @theme mine */\n@import 'gaia';\nsection { background: url(bg.png); }\n"
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "bg.png").write_bytes(
        (
            Path(__file__).parents[2] / "fixtures" / "markdown_decks" / "assets" / "square.png"
        ).read_bytes()
    )
    for chosen in ("mine", "assets/mine.css"):
        extra = f"theme: {chosen}\n"
        deck = _deck(tmp_path, "# A\n", limits, extra, {"assets/mine.css": theme})
        [document] = _documents(deck, limits)
        assert ('data-theme="mine"' in document) is (chosen == "mine")  # by path: the default
        assert "--color-background:light-dark(#fff8e1, #455a64)" in document  # from gaia
        assert "background:url(data:image/png;base64," in document.replace('"', "")


def test_fit_headings_are_marked_for_marps_browser_script(
    tmp_path: Path, limits: DeckLimits
) -> None:
    [document] = _documents(_deck(tmp_path, "# Big <!--fit-->\n", limits), limits)
    assert '<h1 data-auto-scaling="" id="big" is="marp-h1">' in document
    assert "marp-auto-scaling" in document  # the script that fits them runs in the page


def test_math_is_mathjax_by_default_and_katex_uses_the_packages_fonts(
    tmp_path: Path, limits: DeckLimits
) -> None:
    body = "$$\n\\begin{aligned} a &= b \\\\ c &= d \\end{aligned}\n$$\n"
    [mathjax] = _documents(_deck(tmp_path, body, limits), limits)
    assert "<mjx-container" in mathjax and "&amp;" not in mathjax.split("<mjx-container", 1)[1]
    [katex] = _documents(_deck(tmp_path, body, limits, extra="math: katex\n"), limits)
    assert 'class="katex-display"' in katex and 'class="mtable"' in katex
    assert "cdn.jsdelivr" not in katex
    assert re.search(r'font-family:KaTeX_Main;[^}]*src:url\("data:font/woff2;base64,', katex)


def test_speaker_notes_are_marps_comments(tmp_path: Path, limits: DeckLimits) -> None:
    body = "# One\n\n<!-- Say hello. -->\n\n---\n\n<!-- _class: lead -->\n# Two\n"
    documents = _documents(_deck(tmp_path, body, limits), limits)
    assert [page_notes(d) for d in documents] == [["Say hello."], []]


def test_html_keeps_marp_clis_allow_list_or_none(tmp_path: Path, limits: DeckLimits) -> None:
    body = "<b>bold</b> <script>alert(1)</script> <span onclick=alert(2)>s</span>\n"
    [allowed] = _documents(_deck(tmp_path, body, limits), limits)
    assert "<b>bold</b>" in allowed and "alert(1)</script>" not in allowed
    assert "<span>s</span>" in allowed and "alert(2)" not in allowed
    no_html = dataclasses.replace(limits, markdown_html=False)
    [escaped] = _documents(_deck(tmp_path, body, no_html), no_html)
    assert "&lt;b&gt;bold&lt;/b&gt;" in escaped


def test_a_compile_problem_names_the_slides_line(tmp_path: Path, limits: DeckLimits) -> None:
    deck = _deck(tmp_path, "# One\n\n---\n\n# Two\n\n![x](assets/missing.png)\n", limits)
    [problem] = compile_deck_report(deck, limits).problems
    assert problem.page == "slide-02"
    assert "talk.md:8: 'assets/missing.png': no such asset" in problem.message


def test_without_node_a_marp_deck_is_refused_saying_what_to_install(
    tmp_path: Path, limits: DeckLimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(marp_engine, "node_executable", lambda: None)
    with pytest.raises(DeckSourceError) as caught:
        _deck(tmp_path, "# A\n", limits)
    assert caught.value.code is DeckSourceErrorCode.MARP_UNAVAILABLE
    assert caught.value.message == (
        "talk.md is a Marp deck, rendered by Marp's own engine, but Node.js (node) is not "
        "installed: install Node.js and run scripts/setup (npm ci --prefix vendor/js)"
    )


def test_a_theme_file_marp_cannot_read_is_a_clear_refusal(
    tmp_path: Path, limits: DeckLimits
) -> None:
    with pytest.raises(DeckSourceError) as caught:
        _deck(tmp_path, "# A\n", limits, "theme: plain.css\n", {"plain.css": "h1 { x: y }"})
    assert caught.value.code is DeckSourceErrorCode.MARP_FAILED
    assert caught.value.message.startswith("talk.md: Marp could not convert the deck: ")
    assert "@theme" in caught.value.message


def test_an_imported_marp_deck_keeps_markdown_pages(tmp_path: Path, limits: DeckLimits) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "talk.md").write_text(FRONT.format(extra="") + "# One\n\n---\n\n# Two\n")
    import_markdown_deck(source / "talk.md", tmp_path / "out", limits)
    assert sorted(p.name for p in (tmp_path / "out" / "pages").iterdir()) == [
        "slide-01.md",
        "slide-02.md",
    ]


def test_the_print_document_holds_every_slide_and_marps_css_once(
    tmp_path: Path, limits: DeckLimits
) -> None:
    deck = _deck(tmp_path, "# One\n\n---\n\n# Two\n\n---\n\n# Three\n", limits)
    assert [p.name for p in compile_deck(deck, limits)] == ["slide-01", "slide-02", "slide-03"]
    document = compile_print_document(deck, limits)
    assert document.count("<section") == 3
    assert document.count('<style data-deckyard="page ') == 1
