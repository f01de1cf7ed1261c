"""Headers that keep user content from running on the API's and the dashboard's origin.

The API serves bytes that tenants wrote (deck assets: SVG, HTML, JS, CSS, fonts) and bytes
rendered from them (PNG, PDF, ZIP) on the same origin as the dashboard, whose session cookie
the API accepts. Such a file opened in a browser must never run as a page of this origin: an
SVG's `<script>` could otherwise call the API with a signed-in admin's session. So every answer
below `/v1/` is served under a `sandbox` Content-Security-Policy (an opaque origin, no script,
no plugin, no subresource), every answer says `nosniff`, and an answer under `/v1/` that is
neither JSON, an event stream nor an image is a download (`Content-Disposition: attachment`).
Hosted sites (`/sites/`) set their own sandbox, which lets a deck's scripts run opaquely.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

USER_CONTENT_POLICY = "sandbox; default-src 'none'"
API_PREFIX = "/v1/"
# Types a browser shows, not runs, when opened (SVG's scripts are stopped by the sandbox).
INLINE_TYPES = ("application/json", "text/event-stream", "image/")


def is_inline(content_type: str) -> bool:
    """Whether an API answer of this type may be shown in the browser rather than downloaded."""
    base = content_type.split(";", 1)[0].strip().lower()
    return base.endswith("+json") or any(base.startswith(t) for t in INLINE_TYPES)


def attachment(filename: str) -> str:
    """A `Content-Disposition` that downloads as `filename` (RFC 6266, UTF-8 names too)."""
    plain = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename
    )
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


class ContentHeadersMiddleware:
    """Adds `nosniff` everywhere, and the sandbox policy and downloads below `/v1/`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = str(scope.get("path", "")).startswith(API_PREFIX)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                if api:
                    headers.setdefault("Content-Security-Policy", USER_CONTENT_POLICY)
                    kind = headers.get("content-type", "")
                    if kind and not is_inline(kind) and "content-disposition" not in headers:
                        headers["Content-Disposition"] = "attachment"
            await send(message)

        await self.app(scope, receive, send_with_headers)
