"""Webhook signatures: HMAC-SHA256 over `{timestamp}.{body}`, sent as `Deckyard-Signature`.

The header is `t=<unix seconds>,v1=<hex>`, with one `v1=` per secret the endpoint signs with
(two during a secret rotation's grace period). A receiver recomputes the HMAC of the timestamp,
a dot and the raw body bytes with its secret, compares it in constant time with any `v1`, and
refuses a timestamp outside its replay window (`verify`; docs/webhooks.md has the recipe).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as secrets_module

SIGNATURE_HEADER = "Deckyard-Signature"
DELIVERY_HEADER = "Deckyard-Delivery"
EVENT_HEADER = "Deckyard-Event"
EVENT_ID_HEADER = "Deckyard-Event-Id"
SCHEME = "v1"
SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_SECONDS = 300
"""The replay window `verify` allows by default (and docs/webhooks.md recommends)."""


def new_secret() -> str:
    """A fresh endpoint secret: `whsec_` and 256 random bits, URL-safe."""
    return SECRET_PREFIX + secrets_module.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `{timestamp}.{body}` under `secret`."""
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signature_header(secrets: list[str], timestamp: int, body: bytes) -> str:
    """The `Deckyard-Signature` value: `t=<timestamp>` and one `v1=` per secret."""
    parts = [f"t={timestamp}"] + [f"{SCHEME}={signature(s, timestamp, body)}" for s in secrets]
    return ",".join(parts)


class SignatureError(ValueError):
    """A delivery's signature header is missing, malformed, stale or does not match."""


def verify(secret: str, header: str, body: bytes, now: float, tolerance: float) -> int:
    """Check a received delivery; returns its timestamp or raises `SignatureError`.

    `body` must be the raw bytes received (not re-serialised JSON). A timestamp more than
    `tolerance` seconds from `now` is refused, which bounds how long a captured delivery can
    be replayed; a receiver that also remembers `Deckyard-Event-Id` drops replays within it.
    """
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == SCHEME:
            candidates.append(value)
    if timestamp is None or not candidates:
        raise SignatureError("no t= timestamp or no v1= signature in the header")
    if abs(now - timestamp) > tolerance:
        raise SignatureError(f"timestamp {timestamp} is outside the {tolerance:g} s window")
    expected = signature(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, c) for c in candidates):
        raise SignatureError("no v1= signature matches")
    return timestamp
