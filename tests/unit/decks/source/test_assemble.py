"""The shared source rules: field paths, deck-relative paths, text decoding, file totals."""

from __future__ import annotations

import pytest

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import (
    MANIFEST_FILE,
    assemble_deck,
    check_file_totals,
    decode_text,
    field_path,
    manifest_from_toml,
    missing_manifest,
    parse_manifest,
    safe_relative,
)
from deckyard.decks.source.limits import DeckLimits, ZipLimits


@pytest.mark.parametrize(
    ("loc", "prefix", "expected"),
    [
        (("title",), "", "title"),
        (("fonts", 0, "file"), "", "fonts[0].file"),
        (("slide", "width"), "manifest", "manifest.slide.width"),
        ((2, "name"), "pages", "pages[2].name"),
        ((), "manifest", "manifest"),
    ],
)
def test_field_path(loc: tuple[int | str, ...], prefix: str, expected: str) -> None:
    assert field_path(loc, prefix) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [("assets/a.png", "assets/a.png"), (" ./assets//x/../a.png ", "assets/a.png")],
)
def test_safe_relative_normalises(path: str, expected: str) -> None:
    assert safe_relative(path, file=None, field="theme") == expected


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "C:x", "assets\\a.png", "..", "../a.css", "a/../../b", ".", ""]
)
def test_safe_relative_refuses_absolute_and_escaping_paths(path: str) -> None:
    with pytest.raises(DeckSourceError) as caught:
        safe_relative(path, file=MANIFEST_FILE, field="theme")
    assert caught.value.code is Code.FIELD_INVALID
    assert caught.value.field == "theme"
    assert caught.value.file == MANIFEST_FILE


def test_decode_text_drops_the_bom_and_normalises_line_ends() -> None:
    assert decode_text(b"\xef\xbb\xbfa\r\nb\rc\n", "pages/a.md") == "a\nb\nc\n"


def test_decode_text_refuses_what_is_not_utf8() -> None:
    with pytest.raises(DeckSourceError) as caught:
        decode_text(b"ok \xff", "pages/a.md")
    assert caught.value.code is Code.NOT_UTF8
    assert caught.value.file == "pages/a.md"
    assert "byte 3" in caught.value.message


def test_manifest_from_toml() -> None:
    manifest = manifest_from_toml(b'title = "T"\n[slide]\nwidth = 1280\nheight = 720\n')
    assert (manifest.title, manifest.slide.width, manifest.slide.height) == ("T", 1280, 720)
    with pytest.raises(DeckSourceError) as caught:
        manifest_from_toml(b"title = \n")
    assert (caught.value.code, caught.value.file) == (Code.MANIFEST_SYNTAX, MANIFEST_FILE)
    assert missing_manifest("in /x").code is Code.MANIFEST_MISSING


def test_file_totals_are_bounded() -> None:
    limits = ZipLimits(max_entries=2, max_total_bytes=10, max_file_bytes=10)
    check_file_totals(2, 10, limits)
    with pytest.raises(DeckSourceError) as many:
        check_file_totals(3, 1, limits)
    assert many.value.code is Code.TOO_MANY_FILES
    with pytest.raises(DeckSourceError) as large:
        check_file_totals(1, 11, limits)
    assert large.value.code is Code.TOO_LARGE


def test_every_problem_of_a_deck_is_reported_in_one_run(limits: DeckLimits) -> None:
    manifest = parse_manifest(
        {
            "title": "T",
            "theme": "missing.css",
            "pages": ["01-a.md", "09-gone.md"],
            "fonts": [{"family": "X", "file": "assets/x.woff2"}],
        },
        file="deck.toml",
        prefix="",
    )
    files = {"pages/01-a.md": b"# A", "pages/02-b.md": b"# B", "pages/bad.txt": b"x"}
    with pytest.raises(DeckSourceError) as excinfo:
        assemble_deck(manifest, files, limits)
    assert [p.code for p in excinfo.value.every()] == [
        Code.PAGE_KIND_UNKNOWN,
        Code.PAGE_NOT_FOUND,
        Code.PAGE_NOT_LISTED,
        Code.THEME_NOT_FOUND,
        Code.FONT_NOT_FOUND,
    ]
