"""One-file Markdown decks compiled: themes, code, math, links, backgrounds, notes, messages."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from deckyard.decks import diagrams
from deckyard.decks.compile.documents import (
    compile_deck,
    compile_deck_report,
    compile_page,
    compile_print_document,
)
from deckyard.decks.compile.themes import expand_theme
from deckyard.decks.errors import CompileErrorCode, DeckSourceError
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.zip_archive import load_deck_zip
from deckyard.outputs.site_presenter import page_notes
from tests.helpers.decks import PNG_1PX, MakeDeck
from tests.helpers.reveal import reveal_deck

FIXTURES = Path(__file__).parents[2] / "fixtures" / "markdown_decks"


@pytest.mark.processes  # Marp's engine runs in Node
def test_a_markdown_file_is_a_deck_of_its_slides(limits: DeckLimits) -> None:
    deck = load_deck_folder(FIXTURES / "marp.md", limits)
    assert [p.name for p in deck.pages] == ["slide-01", "slide-02", "slide-03", "slide-04"]
    assert deck.manifest.title == "Marp fixture"
    assert (deck.width, deck.height) == (1280, 720)  # Marp's slide size
    assert "assets/square.png" in deck.assets
    pages = compile_deck(deck, limits)
    lead, code, split, last = (p.document for p in pages)
    assert 'data-theme="gaia"' in lead and 'class="lead"' in lead
    assert 'class="dy-notes" hidden' in lead and "Speaker note for the title slide." in lead
    assert '<span class="hljs-keyword">def</span>' in code
    assert "<mjx-container" in code
    assert 'href="https://example.org"' in code
    assert 'data-marpit-pagination="2"' in code and "<footer>Deckyard fixture</footer>" in code
    assert "background-color:#fdf6e3" in code
    assert 'data-marpit-advanced-background-split="left"' in split
    assert "data:image/png;base64," in split
    assert 'style="width:120px;"' in split
    assert 'class="invert"' in last and 'data-auto-scaling=""' in last


@pytest.mark.parametrize(("name", "count"), [("slidev.md", 4), ("reveal.md", 4), ("plain.md", 2)])
def test_each_convention_compiles_with_the_right_slide_count(
    limits: DeckLimits, name: str, count: int
) -> None:
    deck = load_deck_folder(FIXTURES / name, limits)
    report = compile_deck_report(deck, limits)
    assert report.problems == []
    assert len(report.pages) == count


def test_reveal_theme_name_maps_to_dark(limits: DeckLimits) -> None:
    deck = load_deck_folder(FIXTURES / "reveal.md", limits)
    document = compile_deck(deck, limits)[1].document
    assert "--dy-bg: #14161b" in document
    assert "background-color: #1d3557" in document


def test_markdown_pages_of_a_folder_deck_get_the_default_theme_html_pages_do_not(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck({"a.md": "# A", "b.html": "<h1>B</h1>"})
    document = compile_deck(deck, limits)[0].document
    assert ".slide.dy-md h1" in document
    assert ".slide h1" not in document


def test_a_theme_may_import_a_builtin_and_a_deck_file(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck(
        {"a.md": "# A"},
        assets={
            "assets/css/base.css": b".slide { background: url(p.png) }",
            "assets/css/p.png": PNG_1PX,
        },
        theme_css='@import "dark";\n@import url("assets/css/base.css");\nh1 { color: red }',
    )
    document = compile_deck(deck, limits)[0].document
    assert "--dy-bg: #14161b" in document
    assert "data:image/png;base64," in document
    assert "@import" not in document


def test_a_remote_or_missing_import_is_a_problem_saying_what_to_do(limits: DeckLimits) -> None:
    out = expand_theme('@import "https://cdn.example/x.css";\n@import "nope.css";', None, {})
    assert [p.message for p in out.problems] == [
        "@import 'https://cdn.example/x.css' is remote and was not fetched (`deckyard render "
        "--offline`, or the workspace's fetch_remote setting or the server's deck_fetch_remote "
        "is off); render without --offline, or download it into assets/",
        "@import 'nope.css': no such file (nope.css)",
    ]


def test_a_builtin_theme_by_name_in_deck_toml(make_deck: MakeDeck, limits: DeckLimits) -> None:
    deck = make_deck({"a.html": "<h1>A</h1>"}, theme="dark")
    assert deck.theme_path is None
    assert "--dy-bg: #14161b" in compile_deck(deck, limits)[0].document


def test_hyperlinks_are_kept_remote_images_still_refused_with_a_fix(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck(
        {
            "a.md": "[site](https://example.org) [mail](mailto:a@example.org) [page](?x=1)\n\n"
            "![remote](https://example.org/x.png)\n"
        }
    )
    report = compile_deck_report(deck, limits)
    assert [(p.code, p.line) for p in report.problems] == [(CompileErrorCode.EXTERNAL_REFERENCE, 3)]
    assert "download it into assets/" in report.problems[0].message


def test_a_file_outside_assets_is_read_as_import_reads_it(
    tmp_path: Path, limits: DeckLimits
) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "x.png").write_bytes(PNG_1PX)
    (tmp_path / "talk.md").write_text("# A\n\n![x](img/x.png)\n")
    deck = load_deck_folder(tmp_path / "talk.md", limits)
    assert list(deck.assets) == ["assets/img/x.png"]
    assert compile_deck_report(deck, limits).problems == []


def test_a_zip_with_one_markdown_file_is_a_markdown_deck(limits: DeckLimits) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("talk/talk.md", (FIXTURES / "marp.md").read_text())
        archive.writestr("talk/assets/square.png", (FIXTURES / "assets/square.png").read_bytes())
    deck = load_deck_zip(buffer.getvalue(), limits)
    assert len(deck.pages) == 4
    assert compile_deck_report(deck, limits).problems == []


def test_a_folder_without_deck_toml_points_at_its_markdown_file(
    tmp_path: Path, limits: DeckLimits
) -> None:
    (tmp_path / "talk.md").write_text("# A\n")
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_folder(tmp_path, limits)
    assert "give the file" in excinfo.value.message and "talk.md" in excinfo.value.message


REVEAL_PAGE = """<!doctype html>
<html><head><title>x</title></head>
<body>
  <div class="reveal">
    <div class="slides">
      <section>Slide 1</section>
    </div>
  </div>
</body></html>
"""


def test_a_reveal_js_deck_as_one_page_of_a_deck_is_refused_naming_the_alternative(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    report = compile_deck_report(make_deck({"index.html": REVEAL_PAGE}), limits)
    assert [(p.code, p.line) for p in report.problems] == [(CompileErrorCode.FRAMEWORK_DECK, 5)]
    assert "whole reveal.js deck" in report.problems[0].message
    assert "deckyard render deck/" in report.problems[0].message


def test_a_reveal_js_folder_is_a_deck_of_its_slides_each_shown_through_reveal_js(
    tmp_path: Path, limits: DeckLimits
) -> None:
    deck = load_deck_folder(reveal_deck(tmp_path / "talk"), limits)
    assert [p.name for p in deck.pages] == ["slide-01", "slide-02", "slide-03", "slide-04"]
    assert (deck.width, deck.height) == (960, 700)
    assert deck.manifest.title == "reveal.js fixture"
    assert [w.describe() for w in deck.warnings] == [
        "index.html:15 (slide 2): fragments show at once",
        "index.html: vertical slides are shown in order",
    ]
    report = compile_deck_report(deck, limits)
    assert report.problems == []
    third = report.pages[2].document
    assert "const at = [1, 1];" in third and "Reveal.slide(at[0], at[1])" in third
    assert third.index("const at =") > third.index('<script src="data:text/javascript')
    assert "\n.reveal .slides" in third or ".reveal .slides {" in third  # the theme unscoped
    assert '.slide[data-page="slide-03"] .reveal' not in third
    assert 'data-src="data:image/png;base64,' in third  # lazy images inlined too
    assert [page_notes(p.document) for p in report.pages] == [[], [], [], ["A speaker note"]]
    printed = compile_print_document(deck, limits)
    assert "overrides.view = 'print'" in printed and "const at = null;" in printed
    assert printed.count("<section") == 5 and "data-page=" not in printed


def test_a_reveal_js_deck_without_the_classic_script_says_which_to_load(
    tmp_path: Path, limits: DeckLimits
) -> None:
    (tmp_path / "index.html").write_text(REVEAL_PAGE)
    report = compile_deck_report(load_deck_folder(tmp_path, limits), limits)
    assert [p.code for p in report.problems] == [CompileErrorCode.FRAMEWORK_DECK]
    assert '<script src="dist/reveal.js">' in report.problems[0].message


def test_one_page_compiles_to_the_same_document_as_in_the_whole_deck(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    deck = make_deck({"a.html": "<h1>A</h1>", "b.md": "<!-- paginate: true -->\n# B"})
    whole = compile_deck(deck, limits)
    alone = compile_page(deck, "b", limits)
    assert (alone.index, alone.sha256) == (1, whole[1].sha256)
    assert 'data-number="2"' in alone.document


@pytest.mark.parametrize(
    ("slide", "size"), [({"width": 1280}, (1280, 720)), ({"height": 2160}, (3840, 2160))]
)
def test_a_partial_slide_table_keeps_the_aspect_ratio_and_says_so(
    make_deck: MakeDeck, slide: dict[str, int], size: tuple[int, int]
) -> None:
    deck = make_deck({"a.md": "# A"}, slide=slide)
    assert (deck.width, deck.height) == size
    assert "keeps the default 16:9 aspect ratio" in deck.warnings[0].message


def test_a_compile_problem_of_a_slide_names_its_line_in_the_markdown_file(
    tmp_path: Path, limits: DeckLimits
) -> None:
    text = "---\ntitle: T\n---\n\n# One\n\n---\n\n# Two\n\ntext\n\n![x](assets/missing.png)\n"
    (tmp_path / "talk.md").write_text(text)
    deck = load_deck_folder(tmp_path / "talk.md", limits)
    [problem] = compile_deck_report(deck, limits).problems
    assert (problem.page, problem.line) == ("slide-02", 6)
    assert problem.describe().startswith("slide-02:6: talk.md:13: ")
    assert text.split("\n")[12] == "![x](assets/missing.png)"


def test_emoji_shortcodes_render_and_unknown_ones_are_warned(
    tmp_path: Path, limits: DeckLimits
) -> None:
    (tmp_path / "talk.md").write_text("# Hi :+1:\n\n:tada: `:smile:` at 10:30:00 :no_such_one:\n")
    deck = load_deck_folder(tmp_path / "talk.md", limits)
    [page] = compile_deck(deck, limits)
    assert "Hi 👍" in page.document and "🎉" in page.document
    assert "<code>:smile:</code>" in page.document and "10:30:00" in page.document
    assert [w.describe() for w in deck.warnings] == [
        "talk.md:3 (slide 1): the emoji shortcode :no_such_one: is not known; it shows as text"
    ]


@pytest.mark.processes  # Marp's engine runs in Node
@pytest.mark.parametrize("theme", ["default", "gaia", "uncover"])
def test_marp_theme_names_are_marps_own_themes(
    tmp_path: Path, limits: DeckLimits, theme: str
) -> None:
    (tmp_path / "talk.md").write_text(f"---\nmarp: true\ntheme: {theme}\n---\n\n# A\n")
    deck = load_deck_folder(tmp_path / "talk.md", limits)
    assert deck.theme_css == ""
    assert f'data-theme="{theme}"' in deck.pages[0].text
    assert not any("built-in" in w.message for w in deck.warnings)


def test_a_mermaid_fence_carries_the_vendored_mermaid_bundle_inline(
    make_deck: MakeDeck, limits: DeckLimits
) -> None:
    assert diagrams.mermaid_available(), "scripts/setup installs vendor/js (npm ci)"
    deck = make_deck({"a.md": "# A\n\n```mermaid\ngraph TD\n  A --> B\n```\n", "b.md": "# B"})
    with_diagram, without = compile_deck(deck, limits)
    assert '<pre class="dy-mermaid">graph TD\n  A --&gt; B\n</pre>' in with_diagram.document
    assert with_diagram.document.count("<script>") == 2
    bundle = diagrams.mermaid_bundle()
    assert bundle is not None and f"<script>{bundle}</script>" in with_diagram.document
    assert "mermaid.run(" in with_diagram.document and "<script src" not in with_diagram.document
    assert "<script>" not in without.document


def test_a_zip_of_a_reveal_js_folder_is_the_same_deck(tmp_path: Path, limits: DeckLimits) -> None:
    folder = reveal_deck(tmp_path / "talk")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, f"talk/{file.relative_to(folder).as_posix()}")
    zipped = load_deck_zip(buffer.getvalue(), limits)
    assert zipped.pages == load_deck_folder(folder, limits).pages
    assert "assets/dist/reveal.js" in zipped.assets


@pytest.mark.parametrize(
    ("front", "size", "note"),
    [
        ("width: 1280", (1280, 720), "gives only width: 1280; height 720 keeps the 16:9"),
        ("revealOptions:\n  height: 540", (960, 540), "gives only height: 540; width 960 keeps"),
        ("width: 1280\nheight: 960", (1280, 960), None),
    ],
)
def test_a_markdown_deck_giving_one_dimension_keeps_16_9_and_says_so(
    tmp_path: Path, limits: DeckLimits, front: str, size: tuple[int, int], note: str | None
) -> None:
    (tmp_path / "talk.md").write_text(f"---\n{front}\n---\n\n# A\n")
    deck = load_deck_folder(tmp_path / "talk.md", limits)
    assert (deck.width, deck.height) == size
    notes = [w.message for w in deck.warnings if "aspect ratio" in w.message]
    assert len(notes) == (0 if note is None else 1)
    assert note is None or note in notes[0]
