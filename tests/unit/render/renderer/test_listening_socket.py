"""The renderer's listening socket: every connection it accepts sends without Nagle's delay.

The renderer binds its socket itself (`--port 0`, the port reported in its listening line) and
hands it to uvicorn on asyncio's standard loop. asyncio turns TCP_NODELAY on for an accepted
connection only when the socket says it is TCP (`proto == IPPROTO_TCP`); a socket made as
`socket(family, SOCK_STREAM)` says 0, and then a response written in two pieces waited for the
client's delayed ACK: about 40 ms on every call after a connection's first few (capabilities
44 ms against 3-5 ms with the option on, measured on loopback).
"""

from __future__ import annotations

import asyncio
import socket

from deckyard.render.renderer.main import _bind


async def _accepted_nodelay() -> int:
    sock = _bind("127.0.0.1", 0)
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def connected(transport: asyncio.BaseTransport) -> None:
        raw = transport.get_extra_info("socket")
        seen.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        transport.close()

    class Protocol(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            connected(transport)

    server = await asyncio.get_running_loop().create_server(Protocol, sock=sock)
    try:
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_connections_accepted_on_the_standard_loop_have_nodelay() -> None:
    # the renderer runs on asyncio's own loop (Playwright's), not uvloop
    assert asyncio.run(_accepted_nodelay()) != 0


def test_the_socket_says_it_is_tcp() -> None:
    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()
