"""The audit after a document's capture: axe-core's rules, missing glyphs, font fallbacks."""

from __future__ import annotations

from typing import Any

import pytest

from tests.drills.support import RendererProcess

pytestmark = pytest.mark.chromium

GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"


def diagnostics(renderer: RendererProcess, attempt: str, page: str, **extra: Any) -> dict[str, Any]:
    body = {"attempt_id": attempt, "document": page, "width": 800, "height": 600, **extra}
    assert renderer.submit_one(body).status_code == 202
    found: dict[str, Any] = renderer.wait_page(attempt)[1]["diagnostics"]
    return found


def test_axe_reports_alt_text_heading_order_lang_links_and_contrast(
    audited: RendererProcess,
) -> None:
    page = f"""<html><body style="background:#fff">
    <h1>Title</h1><h4>Jumped</h4>
    <img src="{GIF}" width="20" height="20">
    <a href="#x"></a>
    <p style="color:#bbb">Pale grey text</p></body></html>"""
    found = diagnostics(audited, "axe-bad", page)
    rules = {p["rule"]: p for p in found["accessibility"]}
    assert set(rules) == {
        "image-alt",
        "heading-order",
        "html-has-lang",
        "link-name",
        "color-contrast",
    }
    assert rules["heading-order"]["target"] == "h4"
    assert rules["image-alt"]["target"] == "img"
    assert "alternative text" in rules["image-alt"]["message"]
    assert found["invisible_text"] == []  # 1.9:1 is poor, not invisible: only axe reports it
    assert found["timings"]["audit_ms"] > 0

    # an export's render (its pages were audited when validated) asks for none
    skipped = diagnostics(audited, "axe-off", page, audit=False)
    assert skipped["accessibility"] == [] and skipped["missing_glyphs"] == []
    assert not skipped["timings"].get("audit_ms")


def test_the_pages_own_script_cannot_silence_the_audit(audited: RendererProcess) -> None:
    """axe-core runs in a world of its own: a page that defines or breaks `axe` changes nothing."""
    page = f"""<html><body style="background:#fff;color:#111">
    <script>
      window.axe = {{ run: () => Promise.resolve({{ violations: [] }}) }};
      Object.defineProperty(window, 'axe', {{ value: window.axe, writable: false }});
      Element.prototype.getAttribute = () => 'stolen';
    </script>
    <h1>Title</h1><img src="{GIF}" width="20" height="20"></body></html>"""
    for attempt in ("axe-tamper-1", "axe-tamper-2"):  # a fresh tab, then a reset one
        rules = {p["rule"] for p in diagnostics(audited, attempt, page)["accessibility"]}
        assert {"image-alt", "html-has-lang"} <= rules, attempt


def test_a_clean_page_has_no_accessibility_findings(audited: RendererProcess) -> None:
    page = f"""<html lang="en"><body style="background:#fff;color:#111">
    <h1>Title</h1><h2>Section</h2><img src="{GIF}" alt="A dot" width="20" height="20">
    <a href="#x">Read more</a></body></html>"""
    found = diagnostics(audited, "axe-clean", page)
    assert found["accessibility"] == []
    assert found["missing_glyphs"] == [] and found["font_fallbacks"] == []


def test_a_character_no_font_has_is_a_missing_glyph(audited: RendererProcess) -> None:
    page = """<html lang="en"><body>
    <p class="pua" style="font-family: 'Noto Sans', sans-serif">Icon \ue000 here \U0010fffd</p>
    <p>Plain words</p></body></html>"""
    found = diagnostics(audited, "glyph-pua", page)
    [missing] = found["missing_glyphs"]
    assert missing["characters"] == "\ue000\U0010fffd"
    assert missing["element"] == "p.pua"
    assert missing["requested"] == '"Noto Sans", sans-serif'
    assert missing["drawn_with"] == ["Noto Sans"]
    assert found["font_fallbacks"] == []


def test_cjk_text_in_a_font_that_is_not_there_is_a_fallback(audited: RendererProcess) -> None:
    page = """<html lang="ja"><body>
    <p style="font-family: NoSuchFont">日本語のテキスト</p>
    <p style="font-family: NoSuchFont, 'Noto Sans CJK JP', sans-serif">名前のある予備</p>
    <p style="font-family: sans-serif">総称ファミリー</p>
    <p>既定のフォント</p></body></html>"""
    found = diagnostics(audited, "glyph-cjk", page)
    [fallback] = found["font_fallbacks"]
    assert fallback["requested"] == "NoSuchFont"
    assert fallback["text"] == "日本語のテキスト"
    assert fallback["drawn_with"] and "NoSuchFont" not in fallback["drawn_with"]
    assert all("CJK" in font for font in fallback["drawn_with"])
    assert found["missing_glyphs"] == []


def test_the_pages_own_script_cannot_break_the_glyph_scan(audited: RendererProcess) -> None:
    """The glyph scan runs in the audit's world too: a page that replaces the DOM methods it
    calls in its own world still gets its missing glyph found."""
    page = """<html lang="en"><body>
    <script>
      Element.prototype.setAttribute = () => {};
      Element.prototype.getElementsByTagName = () => [];
      window.getComputedStyle = () => ({ fontFamily: 'serif' });
    </script>
    <p class="pua" style="font-family: 'Noto Sans', sans-serif">Icon \ue000 here</p>
    </body></html>"""
    found = diagnostics(audited, "glyph-tamper", page)
    [missing] = found["missing_glyphs"]
    assert missing["characters"] == "\ue000"
    assert missing["element"] == "p.pua"
