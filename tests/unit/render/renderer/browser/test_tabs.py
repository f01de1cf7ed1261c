"""Large `data:` fonts and images leave the HTML; everything else stays as written."""

from __future__ import annotations

import base64

from deckyard.render.renderer.browser.tabs import (
    DOCUMENT_URL,
    INLINE_PREFIX,
    extract_inline_files,
)

FONT = bytes(range(256)) * 64
IMAGE = b"\x89PNG" + bytes(20_000)


def uri(media: str, data: bytes) -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def test_a_large_font_and_image_are_served_by_url_with_their_bytes_and_type() -> None:
    font = uri("font/ttf", FONT)
    image = uri("image/png", IMAGE)
    doc = (
        f'<style>@font-face {{ font-family: "X"; src: url("{font}") format("truetype"); }}'
        f"@font-face {{ font-family: Y; src: url( {font} ); }}</style>"
        f'<img alt="a" class="c" src="{image}"><img src=\'{image}\'>'
    )
    out = extract_inline_files(doc, 1024)
    assert "base64" not in out.document
    assert len(out.files) == 2  # the same bytes are one file, however often they appear
    by_type = {media: data for data, media in out.files.values()}
    assert by_type == {"font/ttf": FONT, "image/png": IMAGE}
    for path in out.files:
        assert path.startswith(INLINE_PREFIX)
        assert out.document.count(DOCUMENT_URL + path) == 2
        assert out.shown_as[DOCUMENT_URL + path].startswith("data:")
    assert 'format("truetype")' in out.document
    assert 'alt="a" class="c" src="' + DOCUMENT_URL in out.document


def test_small_uris_scripts_backgrounds_and_other_types_stay_inline() -> None:
    big_svg = uri("image/svg+xml", b"<svg/>" * 4000)
    small_font = uri("font/woff2", b"tiny")
    big_text = uri("text/plain", b"x" * 40_000)
    doc = (
        f'<style>.a {{ background: url("{big_svg}") }}'
        f'@font-face {{ font-family: S; src: url("{small_font}") }}</style>'
        f'<script>const s = "{big_text}"; const i = "{big_svg}";</script>'
        f'<a href="{big_text}">x</a><video src="{big_svg}"></video>'
    )
    out = extract_inline_files(doc, 1024)
    assert out.document == doc
    assert out.files == {}


def test_a_payload_that_is_not_base64_is_left_for_the_browser_to_judge() -> None:
    doc = '<img src="data:image/png;base64,' + "A" * 5001 + '">'
    out = extract_inline_files(doc, 1024)
    assert out.document == doc and not out.files


def test_media_type_parameters_are_kept_in_the_served_type() -> None:
    image = uri("image/svg+xml;charset=utf-8", b"<svg xmlns='http://www.w3.org/2000/svg'/>" * 50)
    out = extract_inline_files(f'<img src="{image}">', 1024)
    assert [media for _data, media in out.files.values()] == ["image/svg+xml;charset=utf-8"]


def test_markers_match_in_any_ascii_case_and_only_in_ascii() -> None:
    font = base64.b64encode(FONT).decode()
    image = base64.b64encode(IMAGE).decode()
    doc = (
        f'<style>@font-face {{ src: URL("DATA:font/ttf;BASE64,{font}") }}</style>'
        f'<IMG Alt="a" SRC="Data:image/png;Base64,{image}">'
    )
    out = extract_inline_files(doc, 1024)
    assert "base64" not in out.document.lower()
    assert len(out.files) == 2
    # A non-ASCII look-alike (LONG S for "s") is not the marker Chromium reads: left alone.
    long_s = "\N{LATIN SMALL LETTER LONG S}"
    lookalike = f'<style>@font-face {{ src: url("data:font/ttf;ba{long_s}e64,{font}") }}</style>'
    assert extract_inline_files(lookalike, 1024).files == {}
