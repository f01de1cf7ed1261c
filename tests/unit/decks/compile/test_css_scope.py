"""Scoping page CSS to its slide: selectors, at-rules, and what stays global."""

from __future__ import annotations

import pytest

from deckyard.decks.compile.assets import AssetResolver
from deckyard.decks.compile.css_scope import CssContext, rewrite_stylesheet
from deckyard.decks.errors import CompileErrorCode

SCOPE = '.slide[data-page="p"]'


def _scoped(css: str) -> str:
    ctx = CssContext(AssetResolver({}))
    out = rewrite_stylesheet(css, ctx, SCOPE)
    assert ctx.problems == []
    return out


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("h1", f"{SCOPE} h1"),
        ("h1, .a > p", f"{SCOPE} h1, {SCOPE} .a > p"),
        ("body", SCOPE),
        ("body.dark h2", f"{SCOPE}.dark h2"),
        ("html body > p", f"{SCOPE} > p"),
        (":root", SCOPE),
        (".slide", SCOPE),
        (".slide:hover p", f"{SCOPE}:hover p"),
        (".slides", f"{SCOPE} .slides"),
        (":is(h1, h2) span", f"{SCOPE} :is(h1, h2) span"),
        ("bodyx", f"{SCOPE} bodyx"),
    ],
)
def test_selectors_are_scoped_to_the_slide(selector: str, expected: str) -> None:
    assert _scoped(f"{selector} {{ color: red }}") == f"{expected} {{ color: red }}"


def test_media_and_supports_blocks_are_scoped_inside() -> None:
    out = _scoped("@media print { h1 { color: red } }\n@supports (display: grid) { p { x: y } }")
    assert f"@media print {{\n{SCOPE} h1 {{ color: red }}\n}}" in out
    assert f"@supports (display: grid) {{\n{SCOPE} p {{ x: y }}\n}}" in out


def test_font_face_and_keyframes_stay_global() -> None:
    out = _scoped(
        "@font-face { font-family: X; src: local(X) }\n"
        "@keyframes spin { from { transform: rotate(0) } to { transform: rotate(1turn) } }"
    )
    assert "@font-face { font-family: X; src: local(X) }" in out
    assert "@keyframes spin { from { transform: rotate(0) } to" in out
    assert SCOPE not in out


def test_theme_css_is_not_scoped() -> None:
    ctx = CssContext(AssetResolver({}))
    assert rewrite_stylesheet("h1 { color: red }", ctx) == "h1 { color: red }"


def test_syntax_errors_are_reported_with_their_line() -> None:
    ctx = CssContext(AssetResolver({}), first_line=10)
    rewrite_stylesheet("h1 { color: red }\n}\n", ctx, SCOPE)
    assert [(p.code, p.line) for p in ctx.problems] == [(CompileErrorCode.CSS_SYNTAX, 11)]
