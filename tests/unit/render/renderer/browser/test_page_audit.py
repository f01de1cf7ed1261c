"""The page audit's parts that need no browser: coverage, merging, and how findings are graded."""

from __future__ import annotations

from typing import Any

from deckyard.decks.validation.result import DiagnosticCode, Severity, StageStatus
from deckyard.decks.validation.rules import (
    compile_outcome,
    render_outcome_from_diagnostics,
    validation_result,
)
from deckyard.render.protocol import AccessibilityProblem, Diagnostics, GlyphProblem
from deckyard.render.renderer.browser.audit import FontFindings, needs_glyph, parse_charsets

ALT = AccessibilityProblem(
    rule="image-alt", impact="critical", target="img", message="Images must have alternative text"
)
GLYPH = GlyphProblem(
    element="p", text="Icon \ue000", characters="\ue000", requested="Inter", drawn_with=["Inter"]
)
FALLBACK = GlyphProblem(
    element="p", text="日本語", requested="NoSuchFont", drawn_with=["Noto Sans CJK JP"]
)


def info(chars: str, family: str, named: list[str]) -> dict[str, Any]:
    return {"element": "p", "text": chars, "family": family, "named": named, "chars": chars}


def font(name: str, *, custom: bool = False) -> dict[str, Any]:
    return {"familyName": name, "postScriptName": name.replace(" ", ""), "isCustomFont": custom}


def test_charsets_merge_into_ranges() -> None:
    coverage = parse_charsets("20-7e a0-17f\n7f-9f 4e00-9fff\nnot-hex\n")
    assert coverage is not None
    assert all(c in coverage for c in (0x20, 0x7F, 0xA0, 0x17F, 0x4E00))
    assert 0x180 not in coverage and 0xE000 not in coverage and 0x1F not in coverage
    assert coverage.starts == (0x20, 0x4E00)
    assert parse_charsets("") is None


def test_whitespace_controls_and_joiners_need_no_glyph() -> None:
    assert not any(needs_glyph(c) for c in " \u00a0\u200d\ufe0f\n\u2028")
    assert needs_glyph("a") and needs_glyph("\ue000") and needs_glyph("日")


def test_missing_glyphs_merge_per_font_and_web_fonts_are_not_judged() -> None:
    findings = FontFindings(parse_charsets("20-7e"))
    findings.add(info("a\ue000", "Inter", ["Inter"]), [font("Inter")])
    findings.add(info("b\ue001\ue000", "Inter", ["Inter"]), [font("Inter")])
    findings.add(info("c\ue002", "Brand", ["Brand"]), [font("Brand Sans", custom=True)])
    [missing] = findings.missing.values()
    assert missing.characters == "\ue000\ue001" and missing.requested == "Inter"
    assert findings.fallbacks == {}


def test_fallback_only_when_no_named_family_drew_the_text() -> None:
    findings = FontFindings(None)
    findings.add(info("日本", "NoSuchFont", ["NoSuchFont"]), [font("Noto Sans CJK JP")])
    findings.add(info("日本", "NoSuchFont", ["NoSuchFont"]), [font("Noto Sans CJK JP")])
    findings.add(
        info("日a", '"Noto Sans", X', ["Noto Sans", "X"]),
        [font("Noto Sans CJK JP"), font("Noto Sans")],
    )
    findings.add(info("abc", "sans-serif", []), [font("DejaVu Sans")])
    findings.add(info("abc", "Brand", ["Brand"]), [font("Brand Regular", custom=True)])
    assert list(findings.fallbacks.values()) == [
        GlyphProblem(
            element="p", text="日本", requested="NoSuchFont", drawn_with=["Noto Sans CJK JP"]
        )
    ]
    assert findings.missing == {}


def test_accessibility_warns_by_default_and_fails_with_the_setting() -> None:
    diagnostics = Diagnostics(
        accessibility=[ALT], missing_glyphs=[GLYPH], font_fallbacks=[FALLBACK]
    )
    warned = render_outcome_from_diagnostics(diagnostics)
    assert warned.stage.status is StageStatus.WARNING and warned.stage.warnings == 3
    codes = {d.code: d for d in warned.diagnostics}
    assert set(codes) == {
        DiagnosticCode.ACCESSIBILITY,
        DiagnosticCode.MISSING_GLYPH,
        DiagnosticCode.FONT_FALLBACK,
    }
    assert "image-alt" in codes[DiagnosticCode.ACCESSIBILITY].message
    assert "U+E000" in codes[DiagnosticCode.MISSING_GLYPH].message
    assert "Inter" in codes[DiagnosticCode.MISSING_GLYPH].message
    assert "NoSuchFont" in codes[DiagnosticCode.FONT_FALLBACK].message
    assert validation_result(compile_outcome([]), warned, page="p1").success

    failed = render_outcome_from_diagnostics(diagnostics.model_dump(), accessibility_errors=True)
    assert failed.stage.status is StageStatus.FAILED and failed.stage.errors == 1
    severities = {d.code: d.severity for d in failed.diagnostics}
    assert severities[DiagnosticCode.ACCESSIBILITY] is Severity.ERROR
    assert severities[DiagnosticCode.MISSING_GLYPH] is Severity.WARNING
    result = validation_result(compile_outcome([]), failed, page="p1")
    assert not result.success and result.diagnostics[0].page == "p1"


def test_accessibility_is_one_finding_per_rule_and_slide() -> None:
    """A code slide gave 28 color-contrast lines (reveal.js's demo); now one, with the count."""
    low = [
        AccessibilityProblem(
            rule="color-contrast", impact="serious", target=f"span:nth-child({i})", message="Low"
        )
        for i in range(1, 29)
    ]
    outcome = render_outcome_from_diagnostics(Diagnostics(accessibility=[*low, ALT]))
    messages = sorted(d.message for d in outcome.diagnostics)
    assert len(messages) == 2
    assert (
        "color-contrast" in messages[0]
        and "span:nth-child(1) (and 27 more element(s))" in (messages[0])
    )
    assert "image-alt" in messages[1] and "more element" not in messages[1]
