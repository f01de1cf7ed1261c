"""Large `data:` fonts and images of a document, served from the document's own origin instead.

Chromium parses a document with a base64-inlined font slowly: the example deck's pages are
~775 KiB of HTML, almost all of it one display font, and `set_content` of such a page costs ~6x
that of the same page with the font fetched by URL. A document render therefore rewrites each
large (`renderer_inline_extract_min_bytes`) `data:` font in a CSS `url(...)` and each large `data:`
image in an `<img src>` into an absolute same-origin URL (`DOCUMENT_URL` +
`_deckyard/inline/<sha256>`, absolute so a `<base>` element cannot send it elsewhere); the tab
serves the decoded bytes at that URL during that render only, and nothing else changes: fonts are
awaited through `document.fonts.ready` and images hold the `load` event as before.

Only those two places are rewritten, where a URL and a `data:` URI mean the same to the page;
CSS backgrounds stay inline, since a background fetched late could miss the capture. Leak: a
script that reads such a `url(...)` or `src` back as text (to `atob` it, say) sees the URL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field

DOCUMENT_URL = "http://document.deckyard.invalid/"
INLINE_PREFIX = "_deckyard/inline/"
"""Path under the document's origin where extracted files are served (bundle files never are:
the tab answers from this render's extracted files first, by exact key)."""

_MEDIA = r"([A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+)((?:;[A-Za-z0-9.+-]+=[A-Za-z0-9.+%-]+)*)"
_PAYLOAD = r"([A-Za-z0-9+/]+={0,2})"
_FONT_URL = re.compile(
    r"(url\(\s*)([\"']?)data:" + _MEDIA + r";base64," + _PAYLOAD + r"\2(\s*\))", re.IGNORECASE
)
_IMG_SRC = re.compile(
    r"(<img\b[^>]*?\ssrc\s*=\s*)([\"'])data:" + _MEDIA + r";base64," + _PAYLOAD + r"\2",
    re.IGNORECASE,
)
_FONT_TYPES = ("font/", "application/font-", "application/x-font-", "application/vnd.ms-fontobject")


@dataclass
class Extracted:
    """A document with its large `data:` URIs replaced, and what to serve in their place."""

    document: str
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    """Path under the origin (`_deckyard/inline/<sha256>`) -> (bytes, content type)."""
    shown_as: dict[str, str] = field(default_factory=dict)
    """URL -> how diagnostics name it: the start of the original `data:` URI."""


def extract_inline_files(document: str, min_bytes: int) -> Extracted:
    """Rewrite large `data:` fonts in CSS `url()` and large `data:` `<img src>` (module doc)."""
    if "base64," not in document:
        return Extracted(document)
    out = Extracted(document)
    by_payload: dict[str, str] = {}

    def replace(media: str, params: str, payload: str) -> str | None:
        if len(payload) < min_bytes:
            return None
        path = by_payload.get(payload)
        if path is None:
            try:
                data = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                return None
            path = INLINE_PREFIX + hashlib.sha256(data).hexdigest()
            by_payload[payload] = path
            out.files[path] = (data, media + params)
            out.shown_as[DOCUMENT_URL + path] = f"data:{media}{params};base64,{payload[:16]}…"
        return DOCUMENT_URL + path

    def font(match: re.Match[str]) -> str:
        opening, quote, media, params, payload, closing = match.groups()
        if not media.lower().startswith(_FONT_TYPES):
            return match.group(0)
        url = replace(media, params, payload)
        return match.group(0) if url is None else f"{opening}{quote}{url}{quote}{closing}"

    def image(match: re.Match[str]) -> str:
        opening, quote, media, params, payload = match.groups()
        if not media.lower().startswith("image/"):
            return match.group(0)
        url = replace(media, params, payload)
        return match.group(0) if url is None else f"{opening}{quote}{url}{quote}"

    out.document = _IMG_SRC.sub(image, _FONT_URL.sub(font, document))
    return out
