"""What serving a published site needs besides storage: statuses, content types, cache rules,
path checks and the signed tokens of share links.

Everything here is pure (no database, no store), so the rules are unit-tested on their own.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import mimetypes
import re
from dataclasses import dataclass
from enum import StrEnum


class Visibility(StrEnum):
    """Who may read a publication: anyone (`public`) or holders of a share link (`private`)."""

    PUBLIC = "public"
    PRIVATE = "private"


class PublicationStatus(StrEnum):
    """A publication's life: staged while its files are stored and checked, then live, then
    superseded (a newer one went live) or unpublished. Only `live` is ever served."""

    STAGED = "staged"
    LIVE = "live"
    SUPERSEDED = "superseded"
    UNPUBLISHED = "unpublished"


ENDED = (PublicationStatus.SUPERSEDED, PublicationStatus.UNPUBLISHED)
"""Statuses whose files nobody serves any more: they may be deleted after a grace period."""


class SiteCode(StrEnum):
    """Error codes of the hosted-site routes."""

    SITE_NOT_FOUND = "SITE_NOT_FOUND"
    SHARE_LINK_INVALID = "SHARE_LINK_INVALID"
    SHARE_LINK_EXPIRED = "SHARE_LINK_EXPIRED"
    SHARE_LINK_REVOKED = "SHARE_LINK_REVOKED"
    SHARE_LINK_NOT_FOUND = "SHARE_LINK_NOT_FOUND"


IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
PRIVATE_REVALIDATE = "private, no-cache"
CONTENT_SECURITY_POLICY = "sandbox allow-scripts allow-popups allow-modals allow-forms"
"""Every site file runs sandboxed in an opaque origin: a deck's scripts run, but cannot read
the dashboard's cookie-authenticated API on the same host, nor its storage."""

_HASHED_NAME = re.compile(r"\.[0-9a-f]{8,64}\.[A-Za-z0-9]+$")
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".json": "application/json",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
}


def content_type_of(path: str) -> str:
    """The `Content-Type` a site file is served with, from its name."""
    dot = path.rfind(".")
    ext = path[dot:].lower() if dot > path.rfind("/") else ""
    if ext in _TYPES:
        return _TYPES[ext]
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


def is_content_hashed(path: str) -> bool:
    """True for a file whose name carries its content hash (`app.3f2a9c1b.js`)."""
    return _HASHED_NAME.search(path.rsplit("/", 1)[-1]) is not None


def cache_control_of(path: str, visibility: Visibility) -> str:
    """Content-hashed files are immutable for a year; the rest (HTML, the manifest) are
    revalidated on every use with their `ETag`. Private sites are never stored by shared caches."""
    if visibility is Visibility.PRIVATE:
        return PRIVATE_REVALIDATE
    return IMMUTABLE if is_content_hashed(path) else REVALIDATE


def is_safe_site_path(path: str) -> bool:
    """A relative, normalised path without `..`, `.`, empty parts, backslashes or controls.

    Serving looks paths up among a publication's verified files, so an unsafe path could never
    match anyway; refusing it first keeps the rule visible and cheap.
    """
    if not path or path.startswith("/") or "\\" in path or len(path) > 1000:
        return False
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def etag_of(sha256: str) -> str:
    """The strong `ETag` of a site file: its SHA-256."""
    return f'"{sha256}"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an `If-None-Match` header names `etag` (weak comparison, `*` included)."""
    if not if_none_match:
        return False
    for tag in (t.strip() for t in if_none_match.split(",")):
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False


class ShareTokenError(Exception):
    """A share token that is malformed, forged or expired (`code` says which)."""

    def __init__(self, code: SiteCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ShareClaim:
    """What a verified share token says: its link and when it expires (Unix seconds)."""

    link_id: int
    expires: int


def _signature(key: str, link_id: int, deck_id: int, expires: int) -> str:
    message = f"deckyard-share/1:{link_id}:{deck_id}:{expires}".encode()
    digest = hmac.new(key.encode(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def share_token_sign(key: str, link_id: int, deck_id: int, expires: int) -> str:
    """The token of share link `link_id` for `deck_id`, valid until `expires` (Unix seconds)."""
    return f"{link_id}.{expires}.{_signature(key, link_id, deck_id, expires)}"


def share_token_read(key: str, token: str, deck_id: int, now: float) -> ShareClaim:
    """Check `token`'s signature for `deck_id` and its expiry; revocation is the caller's
    (a database row). Raises `ShareTokenError`."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ShareTokenError(SiteCode.SHARE_LINK_INVALID, "the share link is malformed")
    link_id, expires = int(parts[0]), int(parts[1])
    if not hmac.compare_digest(parts[2], _signature(key, link_id, deck_id, expires)):
        raise ShareTokenError(SiteCode.SHARE_LINK_INVALID, "the share link's signature is wrong")
    if now >= expires:
        raise ShareTokenError(SiteCode.SHARE_LINK_EXPIRED, "the share link has expired")
    return ShareClaim(link_id, expires)
