"""Compiling pages: Markdown and HTML, inlined assets, reference errors with their location."""

from __future__ import annotations

import base64
import re

import pytest
from bs4 import BeautifulSoup

from deckyard.decks.compile.documents import (
    CompiledPage,
    compile_deck,
    compile_deck_report,
    compile_each,
    compile_page,
    compile_print_document,
)
from deckyard.decks.errors import CompileError, CompileErrorCode
from deckyard.decks.source.limits import DeckLimits
from tests.helpers.decks import PNG_1PX, MakeDeck

PNG_URI = "data:image/png;base64," + base64.b64encode(PNG_1PX).decode()


def _problems(
    excinfo: pytest.ExceptionInfo[CompileError],
) -> list[tuple[str, str | None, int | None, str]]:
    return [(p.page, p.reference, p.line, p.code) for p in excinfo.value.problems]


def test_markdown_page_compiles_to_a_slide_sized_document(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck(
        {"intro.md": "# Hello *deck*\n\n- one\n- two\n"}, slide={"width": 1280, "height": 720}
    )
    page = compile_page(deck, "intro", limits)
    soup = BeautifulSoup(page.document, "html5lib")
    slide = soup.select_one('div.slide[data-page="intro"]')
    assert slide is not None
    assert slide.h1 is not None and slide.h1.decode_contents() == "Hello <em>deck</em>"
    assert [li.text for li in slide.find_all("li")] == ["one", "two"]
    assert soup.find("meta", charset="utf-8") is not None
    assert "width: 1280px !important; height: 720px !important" in page.document
    assert page.width == 1280 and page.height == 720 and page.index == 0
    assert len(page.sha256) == 64


def test_one_page_compiles_to_the_document_the_deck_stores_for_it(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    # validation compiles one page; it must render exactly what the page version stores
    deck = make_deck({"01-a.md": "# A", "02-b.html": "<h1>B</h1>", "03-c.md": "# C"})
    stored = compile_deck_report(deck, limits).pages
    for page in stored:
        alone = compile_page(deck, page.name, limits)
        assert (alone.document, alone.sha256, alone.index) == (
            page.document,
            page.sha256,
            page.index,
        )
    assert 'data-number="3"' in compile_page(deck, "03-c", limits).document


def test_compiling_each_page_gives_what_compile_page_gives_or_raises(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    # deck validation compiles every page at once; each must match its compile_page
    deck = make_deck(
        {
            "01-a.md": "# A",
            "02-b.html": '<h1>B</h1><img src="assets/nope.png">',
            "03-c.md": "# C",
        }
    )
    each = compile_each(deck, limits)
    assert list(each) == ["01-a", "02-b", "03-c"]
    for name in ("01-a", "03-c"):
        alone, together = compile_page(deck, name, limits), each[name]
        assert isinstance(together, CompiledPage)
        assert (together.document, together.sha256, together.index) == (
            alone.document,
            alone.sha256,
            alone.index,
        )
    with pytest.raises(CompileError) as excinfo:
        compile_page(deck, "02-b", limits)
    failed = each["02-b"]
    assert isinstance(failed, CompileError)
    assert failed.problems == excinfo.value.problems


def test_a_theme_problem_fails_every_page_compiled_at_once(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck({"a.md": "# A", "b.md": "# B"}, theme_css=".x { background: url(gone.png) }")
    each = compile_each(deck, limits)
    for name in ("a", "b"):
        failed = each[name]
        assert isinstance(failed, CompileError)
        assert [(p.page, p.reference) for p in failed.problems] == [("theme", "gone.png")]


def test_html_page_keeps_markup_and_moves_page_css_into_a_scoped_stylesheet(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck(
        {
            "a.html": "<style>h1 { color: red }</style>\n<h1 id=t>Title</h1>\n"
            "<svg viewBox='0 0 1 1'></svg>"
        }
    )
    page = compile_page(deck, "a", limits)
    assert '.slide[data-page="a"] h1 { color: red }' in page.document
    assert '<h1 id="t">Title</h1>' in page.document
    assert 'viewBox="0 0 1 1"' in page.document


def test_page_css_does_not_leak_to_other_pages_in_the_print_document(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck(
        {
            "red.html": "<style>h1 {color:red} body {background: black}</style><h1>Red</h1>",
            "plain.md": "# Plain",
        }
    )
    doc = compile_print_document(deck, limits)
    rules = re.findall(r"^([^{}\n]*)\{[^}]*color:red", doc, flags=re.M)
    assert rules == ['.slide[data-page="red"] h1 ']
    assert '.slide[data-page="red"] {background: black}' in doc
    assert not re.search(r"^\s*h1\s*\{", doc, flags=re.M)
    assert "@page { size: 1920px 1080px; margin: 0; }" in doc
    assert "break-after: page" in doc
    slides = BeautifulSoup(doc, "html5lib").select("body > div.slide")
    assert [s["data-page"] for s in slides] == ["red", "plain"]


def test_every_reference_is_inlined_and_nothing_points_outside(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    html = (
        '<img src="assets/p.png" srcset="assets/p.png 1x, ./assets/p.png 2x">\n'
        '<div style="background: url(assets/p.png)"></div>\n'
        '<a href="#top">top</a>\n'
        '<style>.x { background-image: url("assets/p.png") }</style>\n'
        '<link rel="stylesheet" href="assets/css/extra.css">'
    )
    deck = make_deck(
        {"a.html": html, "b.md": "![dot](assets/p.png)"},
        assets={
            "assets/p.png": PNG_1PX,
            "assets/css/extra.css": b".y { background: url(../p.png) }",
            "assets/f.woff2": b"wOF2fake",
        },
        theme_css=".slide { background: url(assets/p.png) }",
        fonts=[{"family": "Deck Sans", "file": "assets/f.woff2"}],
    )
    for page in compile_deck(deck, limits):
        assert 'src="assets/' not in page.document
        assert "url(assets/" not in page.document
        assert "http:" not in page.document and "https:" not in page.document
        assert PNG_URI in page.document
        assert (
            '@font-face { font-family: "Deck Sans"; src: url("data:font/woff2;base64,'
            in page.document
        )
    a = compile_page(deck, "a", limits).document
    assert f'srcset="{PNG_URI} 1x, {PNG_URI} 2x"' in a
    assert f'.slide[data-page="a"] .y {{ background: url("{PNG_URI}") }}' in a
    assert 'href="#top"' in a


def test_missing_asset_names_page_reference_and_line(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck({"cover.html": '<h1>Hi</h1>\n<p>\n  <img\n    src="assets/nope.png">\n</p>'})
    with pytest.raises(CompileError) as excinfo:
        compile_page(deck, "cover", limits)
    assert _problems(excinfo) == [("cover", "assets/nope.png", 4, CompileErrorCode.MISSING_ASSET)]
    assert "assets/nope.png" in str(excinfo.value) and "cover:4" in str(excinfo.value)


def test_markdown_errors_name_the_markdown_line(make_deck: MakeDeck, limits: DeckLimits) -> None:
    text = (
        "# Title\n"  # 1
        "\n"  # 2
        "Text and\n"  # 3
        "![a](../secret.png)\n"  # 4
        "\n"  # 5
        "<div>\n"  # 6
        "<p>x</p>\n"  # 7
        '<img src="assets/gone.png">\n'  # 8
        "</div>\n"  # 9
        "\n"  # 10
        'Inline <img src="http://example.com/x.png"> here\n'  # 11
        "\n"  # 12
        "<style>\n"  # 13
        "p { color: red }\n"  # 14
        "h2 { background: url(/etc/passwd) }\n"  # 15
        "</style>\n"  # 16
    )
    deck = make_deck({"notes.md": text})
    with pytest.raises(CompileError) as excinfo:
        compile_page(deck, "notes", limits)
    assert _problems(excinfo) == [
        ("notes", "../secret.png", 4, CompileErrorCode.ESCAPING_PATH),
        ("notes", "assets/gone.png", 8, CompileErrorCode.MISSING_ASSET),
        ("notes", "http://example.com/x.png", 11, CompileErrorCode.EXTERNAL_REFERENCE),
        ("notes", "/etc/passwd", 15, CompileErrorCode.ABSOLUTE_PATH),
    ]


@pytest.mark.parametrize(
    ("reference", "code"),
    [
        ("../assets/p.png", CompileErrorCode.ESCAPING_PATH),
        ("assets/../../p.png", CompileErrorCode.ESCAPING_PATH),
        ("/assets/p.png", CompileErrorCode.ABSOLUTE_PATH),
        ("C:/p.png", CompileErrorCode.ABSOLUTE_PATH),
        ("file:///etc/passwd", CompileErrorCode.EXTERNAL_REFERENCE),
        ("https://cdn.example.com/p.png", CompileErrorCode.EXTERNAL_REFERENCE),
        ("//cdn.example.com/p.png", CompileErrorCode.EXTERNAL_REFERENCE),
        ("javascript:alert(1)", CompileErrorCode.EXTERNAL_REFERENCE),
        ("assets\\p.png", CompileErrorCode.INVALID_REFERENCE),
        ("assets/q.png", CompileErrorCode.MISSING_ASSET),
    ],
)
def test_escaping_and_external_references_are_refused(
    make_deck: MakeDeck, limits: DeckLimits, reference: str, code: CompileErrorCode
) -> None:
    deck = make_deck(
        {"p.html": f'<p>hi</p>\n<img src="{reference}">'}, assets={"assets/p.png": PNG_1PX}
    )
    with pytest.raises(CompileError) as excinfo:
        compile_page(deck, "p", limits)
    assert _problems(excinfo) == [("p", reference, 2, code)]


def test_data_uris_pass_through(make_deck: MakeDeck, limits: DeckLimits) -> None:
    deck = make_deck({"p.html": f'<img src="{PNG_URI}">'})
    assert PNG_URI in compile_page(deck, "p", limits).document


def test_theme_errors_name_the_theme_and_fail_every_page(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck(
        {"a.md": "# A", "b.md": "# B"}, theme_css="h1 {}\n.x { background: url(gone.png) }"
    )
    with pytest.raises(CompileError) as excinfo:
        compile_deck(deck, limits)
    assert _problems(excinfo) == [("theme", "gone.png", 2, CompileErrorCode.MISSING_ASSET)]


def test_a_theme_rule_that_does_not_parse_is_a_syntax_problem_on_its_line(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck(
        {"a.md": "# A", "b.html": "<h1>B</h1>"},
        assets={"assets/more.css": b"h2 { color: blue }\n\n  ]\n"},
        theme_css='@import "assets/more.css";\nh1 { color: red }\n}\n',
    )
    report = compile_deck_report(deck, limits)
    assert report.pages == []
    assert [(p.page, p.line, p.code) for p in report.problems] == [
        ("theme", 3, CompileErrorCode.CSS_SYNTAX),
        ("theme", 3, CompileErrorCode.CSS_SYNTAX),
    ]
    assert report.problems[0].message.startswith("assets/more.css:3: invalid CSS at column")
    assert report.problems[1].message.startswith("invalid CSS at column")


def test_a_font_whose_file_is_gone_is_a_problem_of_the_manifest_not_a_crash(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    font = {"family": "Display", "file": "assets/display.woff2"}
    deck = make_deck({"a.md": "# A"}, assets={"assets/display.woff2": b"wOF2"}, fonts=[font])
    assert compile_deck(deck, limits)
    gone = deck.model_copy(update={"assets": {}})
    with pytest.raises(CompileError) as excinfo:
        compile_page(gone, "a", limits)
    assert _problems(excinfo) == [
        ("deck.toml", "assets/display.woff2", None, CompileErrorCode.MISSING_ASSET)
    ]
    assert excinfo.value.problems[0].message.startswith("fonts[0].file: ")
    failed = compile_each(gone, limits)["a"]
    assert isinstance(failed, CompileError) and failed.problems == excinfo.value.problems


def test_import_and_page_rules_are_refused(make_deck: MakeDeck, limits: DeckLimits) -> None:
    deck = make_deck({"a.html": "<style>\n@import url(x.css);\n@page { size: A4 }\n</style>"})
    with pytest.raises(CompileError) as excinfo:
        compile_page(deck, "a", limits)
    codes = [(p.code, p.line) for p in excinfo.value.problems]
    assert codes == [(CompileErrorCode.CSS_UNSUPPORTED, 2), (CompileErrorCode.CSS_UNSUPPORTED, 3)]


def test_all_problems_of_a_deck_are_reported_together(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck({"a.html": '<img src="x.png">', "b.html": '<img src="y.png">'})
    with pytest.raises(CompileError) as excinfo:
        compile_deck(deck, limits)
    assert [(p.page, p.reference) for p in excinfo.value.problems] == [
        ("a", "x.png"),
        ("b", "y.png"),
    ]


def test_unknown_page_is_a_compile_error(make_deck: MakeDeck, limits: DeckLimits) -> None:
    with pytest.raises(CompileError) as excinfo:
        compile_page(make_deck({"a.md": "# A"}), "zzz", limits)
    assert excinfo.value.code is CompileErrorCode.PAGE_NOT_FOUND
