"""The wire protocol: input validation (shapes by pydantic, limits from settings), error kinds,
and request signing (what a valid signature covers and which requests are refused)."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from deckyard.clock import FakeClock
from deckyard.config import Settings
from deckyard.render.protocol import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    DeckAttemptRequest,
    ErrorKind,
    HmacAuth,
    RenderErrorCode,
    RenderInput,
    SignatureProblem,
    SignatureVerifier,
    check_limits,
    error_kind,
    is_retryable,
)


def settings() -> Settings:
    return Settings.load(renderer_max_dimension=4000, renderer_max_pixels=4000 * 3000)


def test_defaults_are_a_full_hd_png() -> None:
    render = RenderInput(document="<p>x</p>")
    assert (render.width, render.height, render.format, render.scale) == (1920, 1080, "png", 1.0)
    assert check_limits(render, settings()) == []
    assert render.capture is True


def test_a_deck_attempt_may_have_pages_without_a_capture() -> None:
    page = {"document": "<p>x</p>", "index": 0}
    deck = DeckAttemptRequest.model_validate(
        {"attempt_id": "a1", "pages": [{**page, "capture": False}, {**page, "index": 1}]}
    )
    assert [p.capture for p in deck.pages] == [False, True]
    with pytest.raises(ValidationError, match="every index once"):
        DeckAttemptRequest.model_validate({"attempt_id": "a1", "pages": [page, page]})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"width": 4001}, "width"),
        ({"height": 5000}, "height"),
        ({"width": 4000, "height": 3000, "scale": 2}, "width"),
        ({"scale": 5}, "scale"),
        ({"timeout_seconds": 10_000}, "timeout_seconds"),
    ],
)
def test_limits_name_the_field(fields: dict[str, object], expected: str) -> None:
    render = RenderInput.model_validate({"document": "x", **fields})
    assert check_limits(render, settings())[0].field == expected


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"document": "x", "url": "http://a/"},
        {"document": "x", "format": "png", "quality": 80},
        {"document": "x", "full_page": True, "clip_selector": "#a"},
        {"document": "x", "width": -1},
        {"document": "x", "extra": 1},
    ],
)
def test_invalid_shapes_are_rejected(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RenderInput.model_validate(fields)


def test_attempt_ids_are_safe_file_names() -> None:
    pages = [{"index": 0, "document": "x"}]
    DeckAttemptRequest.model_validate({"attempt_id": "job-1.attempt:2", "pages": pages})
    # no slash either: a change answer keys a page's inline artefact `attempt_id/index`
    for bad in ("../etc", "", "a/b", "x" * 200):
        with pytest.raises(ValidationError):
            DeckAttemptRequest.model_validate({"attempt_id": bad, "pages": pages})


def test_fingerprint_tells_inputs_apart() -> None:
    one = RenderInput(document="a")
    assert one.fingerprint() == RenderInput(document="a").fingerprint()
    assert one.fingerprint() != RenderInput(document="a", width=10).fingerprint()


def test_error_kinds_are_never_confused() -> None:
    assert error_kind(RenderErrorCode.BROWSER_CRASHED) is ErrorKind.INFRASTRUCTURE
    assert error_kind(RenderErrorCode.SSRF_BLOCKED) is ErrorKind.CONTENT
    assert error_kind(RenderErrorCode.CANCELLED) is ErrorKind.CANCELLED
    assert is_retryable(RenderErrorCode.DEADLINE_EXCEEDED)
    assert error_kind(RenderErrorCode.PAGE_BUDGET_EXCEEDED) is ErrorKind.CONTENT
    assert not is_retryable(RenderErrorCode.PAGE_BUDGET_EXCEEDED)
    assert is_retryable(RenderErrorCode.RESULT_LOST)
    assert not is_retryable(RenderErrorCode.PAGE_ERROR)
    assert not is_retryable(RenderErrorCode.CANCELLED)
    assert not is_retryable(RenderErrorCode.UNAUTHORIZED)
    assert all(error_kind(code) in ErrorKind for code in RenderErrorCode)


SECRET = "unit-secret-0123456789"


def signed(method: str, url: str, body: bytes, clock: FakeClock) -> httpx.Request:
    request = httpx.Request(method, url, content=body)
    flow = HmacAuth(SECRET, clock).auth_flow(request)
    return next(flow)


def verify(request: httpx.Request, clock: FakeClock, secret: str = SECRET) -> object:
    verifier = SignatureVerifier(secret, skew_seconds=300, clock=clock)
    return verifier.verify(
        request.method, request.url.raw_path, dict(request.headers), request.content
    )


def test_signed_request_verifies() -> None:
    clock = FakeClock()
    request = signed("POST", "http://r/v1/deck-attempts?x=1", b'{"a":1}', clock)
    assert verify(request, clock) is None


def test_body_path_query_and_method_are_covered() -> None:
    clock = FakeClock()
    request = signed("POST", "http://r/v1/deck-attempts?x=1", b'{"a":1}', clock)
    verifier = SignatureVerifier(SECRET, 300, clock)
    headers = dict(request.headers)
    for method, target, body in (
        ("POST", b"/v1/deck-attempts?x=1", b'{"a":2}'),
        ("POST", b"/v1/deck-attempts?x=2", b'{"a":1}'),
        ("POST", b"/v1/render?x=1", b'{"a":1}'),
        ("PUT", b"/v1/deck-attempts?x=1", b'{"a":1}'),
    ):
        assert verifier.verify(method, target, headers, body) is SignatureProblem.MISMATCH


def test_wrong_secret_missing_and_malformed_headers_are_refused() -> None:
    clock = FakeClock()
    request = signed("GET", "http://r/v1/capabilities", b"", clock)
    assert verify(request, clock, secret="another-secret-000000") is SignatureProblem.MISMATCH
    del request.headers[SIGNATURE_HEADER]
    assert verify(request, clock) is SignatureProblem.MISSING
    request = signed("GET", "http://r/v1/capabilities", b"", clock)
    request.headers[TIMESTAMP_HEADER] = "soon"
    assert verify(request, clock) is SignatureProblem.MALFORMED


def test_stale_and_future_timestamps_are_refused() -> None:
    clock = FakeClock()
    request = signed("GET", "http://r/v1/capabilities", b"", clock)
    clock.advance(301)
    assert verify(request, clock) is SignatureProblem.STALE
    request = signed("GET", "http://r/v1/capabilities", b"", FakeClock())
    early = FakeClock()
    early.advance(-400)
    assert verify(request, early) is SignatureProblem.STALE
