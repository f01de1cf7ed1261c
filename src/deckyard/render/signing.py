"""HMAC-SHA256 request signing for the renderer's control API, client and server side.

The signature covers the method, the raw path with its query string, a Unix timestamp and the
SHA-256 of the body, so a captured request cannot be replayed against another path or with another
body. It can be replayed unchanged within the skew window; every renderer call is idempotent
(submitting the same attempt twice, cancelling twice), which is what makes that acceptable.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Generator, Mapping
from enum import StrEnum

import httpx

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.render.protocol import SIGNATURE_HEADER, TIMESTAMP_HEADER

SCHEME = "v1"


class SignatureProblem(StrEnum):
    """Why a request's signature was refused."""

    MISSING = "missing signature or timestamp"
    MALFORMED = "malformed signature or timestamp"
    STALE = "timestamp outside the allowed clock skew"
    MISMATCH = "signature does not match"


def sign(secret: str, method: str, target: bytes, timestamp: str, body: bytes) -> str:
    """The `v1=<hex>` signature of a request; `target` is the raw path plus `?query` if any."""
    message = b"\n".join(
        (
            method.upper().encode("ascii"),
            target,
            timestamp.encode("ascii"),
            hashlib.sha256(body).hexdigest().encode("ascii"),
        )
    )
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
    return f"{SCHEME}={digest}"


class HmacAuth(httpx.Auth):
    """Signs every httpx request with the shared secret; use as `httpx.AsyncClient(auth=...)`."""

    requires_request_body = True

    def __init__(self, secret: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self._secret = secret
        self._clock = clock

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the timestamp and signature headers, then send the request once."""
        timestamp = str(int(self._clock.now().timestamp()))
        request.headers[TIMESTAMP_HEADER] = timestamp
        request.headers[SIGNATURE_HEADER] = sign(
            self._secret, request.method, request.url.raw_path, timestamp, request.content
        )
        yield request


class SignatureVerifier:
    """Checks a request's signature with a constant-time compare and a clock-skew window."""

    def __init__(self, secret: str, skew_seconds: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self._secret = secret
        self._skew = skew_seconds
        self._clock = clock

    def verify(
        self, method: str, target: bytes, headers: Mapping[str, str], body: bytes
    ) -> SignatureProblem | None:
        """Return None when the request is authentic and fresh, else the problem found."""
        given = headers.get(SIGNATURE_HEADER.lower()) or headers.get(SIGNATURE_HEADER)
        timestamp = headers.get(TIMESTAMP_HEADER.lower()) or headers.get(TIMESTAMP_HEADER)
        if not given or not timestamp:
            return SignatureProblem.MISSING
        if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
            return SignatureProblem.MALFORMED
        if abs(self._clock.now().timestamp() - int(timestamp)) > self._skew:
            return SignatureProblem.STALE
        expected = sign(self._secret, method, target, timestamp, body)
        if not hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace")):
            return SignatureProblem.MISMATCH
        return None
