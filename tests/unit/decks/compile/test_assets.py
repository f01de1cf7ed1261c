"""Asset references: which are refused and why, how they resolve, and `srcset` splitting."""

from __future__ import annotations

import base64

import pytest

from deckyard.decks.compile.assets import (
    AssetResolver,
    ReferenceProblem,
    data_uri,
    resolve_srcset,
    split_srcset,
)
from deckyard.decks.errors import CompileErrorCode as Code
from deckyard.decks.source.deck_source import Asset

LOGO = Asset(path="assets/img/logo.png", data=b"\x89PNG", media_type="image/png")
LOGO_URI = "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()


@pytest.fixture
def resolver() -> AssetResolver:
    return AssetResolver({LOGO.path: LOGO})


def test_data_uri_is_base64_with_the_media_type() -> None:
    assert data_uri(LOGO) == LOGO_URI


@pytest.mark.parametrize(
    ("reference", "code"),
    [
        ("", Code.INVALID_REFERENCE),
        ("   ", Code.INVALID_REFERENCE),
        ("assets\\img\\logo.png", Code.INVALID_REFERENCE),
        ("/assets/img/logo.png", Code.ABSOLUTE_PATH),
        ("C:/deck/assets/img/logo.png", Code.ABSOLUTE_PATH),
        ("//cdn.example/logo.png", Code.EXTERNAL_REFERENCE),
        ("https://cdn.example/logo.png", Code.EXTERNAL_REFERENCE),
        ("file:///etc/passwd", Code.EXTERNAL_REFERENCE),
        ("javascript:alert(1)", Code.EXTERNAL_REFERENCE),
        ("../outside.png", Code.ESCAPING_PATH),
        ("assets/../../outside.png", Code.ESCAPING_PATH),
        ("assets/img/missing.png", Code.MISSING_ASSET),
    ],
)
def test_bad_references_are_refused_with_their_code(
    resolver: AssetResolver, reference: str, code: Code
) -> None:
    with pytest.raises(ReferenceProblem) as caught:
        resolver.resolve(reference)
    assert caught.value.code is code
    assert caught.value.reference == reference
    assert resolver.used == set()


@pytest.mark.parametrize(
    "reference", ["#top", "data:image/gif;base64,R0lGODlh", "DATA:text/plain,x"]
)
def test_fragments_and_data_uris_are_left_alone(resolver: AssetResolver, reference: str) -> None:
    assert resolver.asset_path(reference) is None
    assert resolver.resolve(reference) == reference
    assert resolver.used == set()


def test_a_reference_resolves_relative_to_its_base_and_keeps_its_fragment(
    resolver: AssetResolver,
) -> None:
    assert resolver.asset_path("../img/logo.png", base_dir="assets/css") == LOGO.path
    assert resolver.asset_path(" assets/img/logo%2Epng?v=2 ") == LOGO.path
    assert resolver.resolve("assets/img/logo.png#part") == LOGO_URI + "#part"
    assert resolver.resolve("./assets/img/logo.png") == LOGO_URI
    assert resolver.used == {LOGO.path}


@pytest.mark.parametrize(
    ("value", "candidates"),
    [
        ("a.png", [("a.png", "")]),
        ("a.png 1x, b.png 2x", [("a.png", "1x"), ("b.png", "2x")]),
        ("  a.png   480w ,b.png 800w  ", [("a.png", "480w"), ("b.png", "800w")]),
        ("a.png, b.png 2x", [("a.png", ""), ("b.png", "2x")]),
        ("a.png,b.png 2x", [("a.png,b.png", "2x")]),
        ("data:image/png;base64,AAAA 1x", [("data:image/png;base64,AAAA", "1x")]),
        ("a.png calc(1px, 2px), b.png", [("a.png", "calc(1px, 2px)"), ("b.png", "")]),
        (" , ,", []),
    ],
)
def test_srcset_is_split_as_the_html_spec_does(
    value: str, candidates: list[tuple[str, str]]
) -> None:
    assert split_srcset(value) == candidates


def test_srcset_candidates_are_all_inlined_or_the_first_bad_one_raises(
    resolver: AssetResolver,
) -> None:
    inlined = resolve_srcset("assets/img/logo.png 1x, assets/img/logo.png 2x", resolver)
    assert inlined == f"{LOGO_URI} 1x, {LOGO_URI} 2x"
    with pytest.raises(ReferenceProblem) as caught:
        resolve_srcset("assets/img/logo.png 1x, https://x.example/b.png 2x", resolver)
    assert caught.value.code is Code.EXTERNAL_REFERENCE
