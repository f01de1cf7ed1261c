"""Every psycopg connection a `Database` opens is closed by `dispose`, whatever was running.

A connection left open is closed by nobody: psycopg warns when the garbage collector finds it
(`PytestUnraisableExceptionWarning` from `BaseConnection.__del__`), in whichever later test
the collection happens to run (issue 30, item 14).
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from deckyard.db import Database
from deckyard.db.engine import PgStatement
from tests.conftest import PG_URL
from tests.helpers.eventually import eventually

pytestmark = pytest.mark.postgres


def backends(application_name: str, query: str = "") -> list[str]:
    """The states of the server's backends opened under `application_name` (running `query`)."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT state FROM pg_stat_activity WHERE application_name = %s"
            " AND position(%s in query) > 0",
            (application_name, query),
        ).fetchall()
    return [state for (state,) in rows]


async def gone(application_name: str) -> bool:
    """Whether no backend of `application_name` is left (a closed one exits a moment later)."""
    return not await asyncio.to_thread(backends, application_name)


async def test_a_statement_running_through_dispose_closes_its_connection(
    pg_schema_url: str,
) -> None:
    name = f"hygiene-{uuid.uuid4().hex[:8]}"
    key = uuid.uuid4().int % 2**31
    db = Database(f"{pg_schema_url}&application_name={name}")
    waits = f"SELECT pg_advisory_xact_lock({key})"

    async def waiting() -> bool:
        return await asyncio.to_thread(backends, name, waits) == ["active"]

    with psycopg.connect(PG_URL, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            await db.write_statement(PgStatement("SELECT 1"), {})
            running = asyncio.create_task(db.write_statement(PgStatement(waits), {}))
            await eventually(waiting, what="the statement waiting for the lock")
        finally:
            await db.dispose()
            holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
    await running
    await eventually(lambda: gone(name), what="every connection of the database closed")


async def test_dispose_closes_the_listen_connection(pg_schema_url: str) -> None:
    name = f"hygiene-{uuid.uuid4().hex[:8]}"
    db = Database(f"{pg_schema_url}&application_name={name}")
    try:
        await db.start_listening()
        listening = await asyncio.to_thread(backends, name, "LISTEN")
        assert len(listening) == 1
    finally:
        await db.dispose()
    await eventually(lambda: gone(name), what="the LISTEN connection closed")
