"""Test-only hooks into the database layer."""

from __future__ import annotations

import socket

from deckyard.db.notify import PgListener


def drop_listen_connection(listener: PgListener) -> None:
    """Break the LISTEN connection's socket, as a network failure would."""
    conn = listener._conn
    if conn is not None:
        sock = socket.socket(fileno=conn.pgconn.socket)
        sock.shutdown(socket.SHUT_RDWR)
        sock.detach()
