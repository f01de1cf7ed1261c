"""Request signing: what a valid signature covers and which requests are refused."""

from __future__ import annotations

import httpx

from deckyard.clock import FakeClock
from deckyard.render.signing import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    HmacAuth,
    SignatureProblem,
    SignatureVerifier,
)

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
    request = signed("POST", "http://r/v1/attempts?x=1", b'{"a":1}', clock)
    assert verify(request, clock) is None


def test_body_path_query_and_method_are_covered() -> None:
    clock = FakeClock()
    request = signed("POST", "http://r/v1/attempts?x=1", b'{"a":1}', clock)
    verifier = SignatureVerifier(SECRET, 300, clock)
    headers = dict(request.headers)
    for method, target, body in (
        ("POST", b"/v1/attempts?x=1", b'{"a":2}'),
        ("POST", b"/v1/attempts?x=2", b'{"a":1}'),
        ("POST", b"/v1/render?x=1", b'{"a":1}'),
        ("PUT", b"/v1/attempts?x=1", b'{"a":1}'),
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
