"""A per-attempt egress proxy that Chromium must use for every connection it makes.

Playwright's request routing does not see redirects, preconnects or tunnels, and Chromium would
resolve DNS itself after the guard did (DNS rebinding). Pointing each attempt's browser context at
its own proxy closes all three: the proxy checks every request, redirect hop and CONNECT tunnel
with the `UrlGuard` and connects only to the addresses the guard just approved. In document
renders the proxy has no guard and refuses everything. Closing the proxy cuts every connection of
the attempt, which is how a cancel aborts a hanging download.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from urllib.parse import urlsplit

from deckyard.render.renderer.ssrf import UrlGuard, Verdict, split_host

BLOCKED_HEADER = "X-Deckyard-Blocked"
_MAX_HEAD = 64 * 1024
_HOP_HEADERS = frozenset(
    {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive", b"te"}
)

OnBlocked = Callable[[str, str], None]


class EgressProxy:
    """An HTTP proxy on 127.0.0.1 bound to one attempt; `guard=None` refuses all traffic.

    Refusals are reported through `on_blocked`, except for `quiet_hosts` (the synthetic document
    origin, which Chromium may preconnect to although the router serves it).
    """

    def __init__(
        self, guard: UrlGuard | None, on_blocked: OnBlocked, quiet_hosts: frozenset[str]
    ) -> None:
        self._guard = guard
        self._quiet_hosts = quiet_hosts
        self._on_blocked = on_blocked
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.blocked_hosts: set[str] = set()

    async def start(self) -> str:
        """Listen on an ephemeral loopback port and return the proxy URL."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_HEAD)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        """Stop listening and cut every open connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            # Only `close()` cancels these tasks. Ending normally keeps Python 3.11's stream
            # callback from calling `exception()` on a cancelled task and logging the error.
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _check(self, url: str, host: str, port: int, connect: bool) -> Verdict:
        if self._guard is None:
            return Verdict(False, "network access is disabled for document renders")
        if connect:
            return await self._guard.check_host(host, port)
        return await self._guard.check_url(url)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, _, header_block = head.partition(b"\r\n")
        method, target, version = request_line.decode("latin-1").split(" ", 2)
        connect = method.upper() == "CONNECT"
        if connect:
            host, port_or_none = split_host(target)
            port = port_or_none or 443
            shown = f"{target} (tunnel)"
            path = ""
        else:
            parts = urlsplit(target)
            host = (parts.hostname or "").rstrip(".")
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
            path = parts.path or "/"
            if parts.query:
                path = f"{path}?{parts.query}"
            shown = target
        verdict = await self._check(target, host, port, connect)
        if not verdict.allowed:
            self.blocked_hosts.add(host)
            if host not in self._quiet_hosts:
                self._on_blocked(shown, verdict.reason)
            await _refuse(writer, 403, "Forbidden", verdict.reason)
            return
        upstream_reader, upstream_writer = await _connect(verdict.addresses, port)
        try:
            if connect:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream_writer.write(_origin_request(method, path, version, header_block))
            await writer.drain()
            await upstream_writer.drain()
            await _pipe_both(reader, writer, upstream_reader, upstream_writer)
        finally:
            upstream_writer.close()


def _origin_request(method: str, path: str, version: str, header_block: bytes) -> bytes:
    lines = [f"{method} {path} {version}".encode("latin-1")]
    for line in header_block.split(b"\r\n"):
        name = line.split(b":", 1)[0].strip().lower()
        if line and name not in _HOP_HEADERS:
            lines.append(line)
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _connect(
    addresses: tuple[str, ...], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    last: OSError | None = None
    for address in addresses:
        try:
            return await asyncio.open_connection(address, port)
        except OSError as exc:
            last = exc
    raise last or OSError("no address to connect to")


async def _refuse(writer: asyncio.StreamWriter, status: int, phrase: str, reason: str) -> None:
    body = f"deckyard renderer refused this request: {reason}\n".encode()
    safe_reason = reason.encode("ascii", "replace").replace(b"\r", b" ").replace(b"\n", b" ")
    writer.write(
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\n".encode()
        + BLOCKED_HEADER.encode()
        + b": "
        + safe_reason
        + f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(65536):
        writer.write(chunk)
        await writer.drain()


async def _pipe_both(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    tasks = {
        asyncio.ensure_future(_copy(client_reader, upstream_writer)),
        asyncio.ensure_future(_copy(upstream_reader, client_writer)),
    }
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
