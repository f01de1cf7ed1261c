"""A server span around every HTTP request, continuing the caller's `traceparent`.

Written on the OpenTelemetry API directly (a pure ASGI middleware, outermost in the stack), so
the span covers the error handlers, the idempotency replay and the body limit too. A request
whose headers carry a W3C `traceparent` continues that trace; others start one. The span is
named `{method} {route}` (`POST /v1/screenshots`, the route's template, never its ids) once
routing found one, `{method}` otherwise; a 5xx answer sets the error status. Probes and scrapes
(`/healthz`, `/readyz`, `/metrics`) are not traced. With tracing off it only passes through.
"""

from __future__ import annotations

from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deckyard import tracing

UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class TracingMiddleware:
    """Runs every HTTP request inside an `http.server` span (`SpanKind.SERVER`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not tracing.enabled() or path in UNTRACED_PATHS:
            await self.app(scope, receive, send)
            return
        method = str(scope.get("method", "GET"))
        headers = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope.get("headers", [])
        }
        about = {
            "http.request.method": method,
            "url.path": path,
            "url.scheme": str(scope.get("scheme", "http")),
        }
        parent = tracing.extract(headers)
        with tracing.span(method, parent=parent, kind=SpanKind.SERVER, attributes=about) as span:

            async def send_traced(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            try:
                await self.app(scope, receive, send_traced)
            finally:
                found = scope.get("route")
                route = getattr(found, "path_format", None) or getattr(found, "path", None)
                if isinstance(route, str):
                    span.set_attribute("http.route", route)
                    span.update_name(f"{method} {route}")
