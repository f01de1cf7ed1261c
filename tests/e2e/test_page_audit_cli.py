"""`deckyard validate` reports accessibility findings, missing glyphs and font fallbacks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import DECKYARD, clean_env
from tests.helpers.decks import EXAMPLE

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
AUDIT_CODES = ("RENDER_ACCESSIBILITY", "RENDER_MISSING_GLYPH", "RENDER_FONT_FALLBACK")


def validate(tmp_path: Path, deck: Path, **env: str) -> tuple[int, str]:
    done = subprocess.run(
        [*DECKYARD, "validate", str(deck)],
        env=clean_env(tmp_path, COLUMNS="400", **{"DECKYARD_RENDERER_PAGE_AUDIT": "true", **env}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@pytest.fixture
def audit_deck(tmp_path: Path) -> Path:
    deck = tmp_path / "deck"
    (deck / "pages").mkdir(parents=True)
    (deck / "deck.toml").write_text(
        'title = "Audit"\nlang = "en"\npages = ["01-bad.html", "02-glyphs.html"]\n'
    )
    (deck / "pages" / "01-bad.html").write_text(
        f'<h1>Title</h1>\n<h4>Jumped heading</h4>\n<img src="{GIF}" width="40" height="40">\n'
    )
    (deck / "pages" / "02-glyphs.html").write_text(
        '<p class="pua">Private \ue000 use</p>\n'
        '<p style="font-family: NoSuchFont">日本語のテキスト</p>\n',
        encoding="utf-8",
    )
    return deck


def test_findings_warn_by_default(tmp_path: Path, audit_deck: Path) -> None:
    code, said = validate(tmp_path, audit_deck)
    assert code == 0, said
    assert "every page passed" in said
    assert (
        "01-bad: warning: 01-bad: accessibility (heading-order): Heading levels should only "
        "increase by one (Heading order invalid): h4 [RENDER_ACCESSIBILITY]"
    ) in said
    assert "01-bad: warning: 01-bad: accessibility (image-alt): Images must have" in said
    assert (
        "02-glyphs: warning: 02-glyphs: no installed font has a glyph for: '\\ue000' (U+E000) "
        'in p.pua "Private \ue000 use"'
    ) in said
    assert (
        '02-glyphs: warning: 02-glyphs: font fallback: p "日本語のテキスト" asked for NoSuchFont '
        "but was drawn with Noto Sans CJK"
    ) in said


def test_accessibility_errors_setting_fails_the_page(tmp_path: Path, audit_deck: Path) -> None:
    code, said = validate(tmp_path, audit_deck, DECKYARD_DECK_ACCESSIBILITY_ERRORS="true")
    assert code == 1, said
    assert "01-bad: error: 01-bad: accessibility (heading-order)" in said
    assert "01-bad: error: 01-bad: accessibility (image-alt)" in said
    assert "02-glyphs: warning: 02-glyphs: no installed font has a glyph for" in said


def test_the_example_deck_has_no_audit_findings(tmp_path: Path) -> None:
    code, said = validate(tmp_path, EXAMPLE, DECKYARD_DECK_ACCESSIBILITY_ERRORS="true")
    assert code == 0, said
    assert not any(c in said for c in AUDIT_CODES), said
