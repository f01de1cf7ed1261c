"""`HEAD` on every `GET` route: the GET's status and headers, without its body.

FastAPI's routes answer only the methods they declare, so a HEAD was a 405. Where no route
serves HEAD itself, this middleware runs a HEAD as the GET it stands for and sends nothing of
the body; a streamed answer (an event
stream) ends after its headers, the app seeing the client disconnect.
"""

from __future__ import annotations

import asyncio

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _served(scope: Scope) -> bool:
    """Whether a route answers HEAD at this path itself (a Starlette route with GET does)."""
    routes = getattr(getattr(scope.get("app"), "router", None), "routes", ())
    return any(route.matches(scope)[0] is Match.FULL for route in routes)


class HeadMiddleware:
    """Answers `HEAD` requests as their `GET`, headers only."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD" or _served(scope):
            await self.app(scope, receive, send)
            return
        done = asyncio.Event()
        # ASGI 2.0 semantics for the app: a streamed response stops when `receive` says the
        # client left, which `until_done` says once the headers are out.
        asgi = {**scope.get("asgi", {}), "spec_version": "2.0"}
        as_get = {**scope, "method": "GET", "asgi": asgi}

        async def until_done() -> Message:
            if done.is_set():
                return {"type": "http.disconnect"}
            message = asyncio.ensure_future(receive())
            ended = asyncio.ensure_future(done.wait())
            await asyncio.wait({message, ended}, return_when=asyncio.FIRST_COMPLETED)
            ended.cancel()
            if message.done():
                return message.result()
            message.cancel()
            return {"type": "http.disconnect"}

        async def headers_only(message: Message) -> None:
            if done.is_set():
                return
            if message["type"] == "http.response.body":
                done.set()
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app(as_get, until_done, headers_only)
