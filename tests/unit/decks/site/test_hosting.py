"""The serving rules of hosted sites: content types, cache lifetimes, paths, share tokens."""

from __future__ import annotations

import pytest

from deckyard.decks.site.hosting import (
    IMMUTABLE,
    PRIVATE_REVALIDATE,
    REVALIDATE,
    ShareTokenError,
    SiteCode,
    Visibility,
    cache_control_of,
    content_type_of,
    etag_matches,
    is_safe_site_path,
    share_token_read,
    share_token_sign,
)

KEY = "x" * 40


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("index.html", "text/html; charset=utf-8"),
        ("pages/01-a.html", "text/html; charset=utf-8"),
        ("manifest.json", "application/json"),
        ("assets/app.3f2a9c1b.js", "text/javascript; charset=utf-8"),
        ("img/logo.PNG", "image/png"),
        ("fonts/a.woff2", "font/woff2"),
        ("LICENSE", "application/octet-stream"),
        ("dir.v1/noext", "application/octet-stream"),
    ],
)
def test_content_types(path: str, expected: str) -> None:
    assert content_type_of(path) == expected


def test_hashed_files_are_immutable_and_html_revalidates() -> None:
    assert cache_control_of("assets/app.3f2a9c1b.js", Visibility.PUBLIC) == IMMUTABLE
    assert cache_control_of("index.html", Visibility.PUBLIC) == REVALIDATE
    assert cache_control_of("pages/01-intro.html", Visibility.PUBLIC) == REVALIDATE
    assert cache_control_of("manifest.json", Visibility.PUBLIC) == REVALIDATE
    assert cache_control_of("assets/app.3f2a9c1b.js", Visibility.PRIVATE) == PRIVATE_REVALIDATE


@pytest.mark.parametrize(
    "path",
    ["", "/etc/passwd", "../x", "pages/../../x", "a//b", "./a", "a\\b", "a\x00b", "pages/", "."],
)
def test_unsafe_paths(path: str) -> None:
    assert not is_safe_site_path(path)


def test_safe_paths() -> None:
    assert is_safe_site_path("index.html") and is_safe_site_path("pages/01-a.html")


def test_etag_matching() -> None:
    assert etag_matches('"a", "b"', '"b"') and etag_matches('W/"b"', '"b"')
    assert etag_matches("*", '"b"') and not etag_matches('"a"', '"b"')
    assert not etag_matches(None, '"b"')


def test_share_tokens_verify_sign_deck_and_expiry() -> None:
    token = share_token_sign(KEY, 7, 3, 2_000)
    assert share_token_read(KEY, token, 3, 1_999).link_id == 7
    cases = [
        (KEY, token, 3, 2_000, SiteCode.SHARE_LINK_EXPIRED),
        (KEY, token, 4, 1_000, SiteCode.SHARE_LINK_INVALID),
        ("y" * 40, token, 3, 1_000, SiteCode.SHARE_LINK_INVALID),
        (KEY, token.replace("7.", "8.", 1), 3, 1_000, SiteCode.SHARE_LINK_INVALID),
        (KEY, token.replace(".2000.", ".9000.", 1), 3, 1_000, SiteCode.SHARE_LINK_INVALID),
        (KEY, "garbage", 3, 1_000, SiteCode.SHARE_LINK_INVALID),
    ]
    for key, tok, deck, now, code in cases:
        with pytest.raises(ShareTokenError) as caught:
            share_token_read(key, tok, deck, now)
        assert caught.value.code is code, (tok, deck, now)
