"""API writes outside jobs survive a PostgreSQL serialization failure or deadlock (issue 11).

Each route's write goes through `Database.write`, which rolls back and runs the transaction
again on 40001/40P01. A trigger on the table the route writes makes PostgreSQL itself fail the
first statement there: with `RAISE ... ERRCODE` for a serialization failure on every path, and
with a real deadlock (two advisory locks taken in opposite order by the request and a second
session, the request's side given the short `deadlock_timeout`) on one of them. The request
must answer as if nothing happened, with its effect stored once and one conflict counted.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, text

from deckyard.decks.schema import decks
from deckyard.jobs.schema import jobs
from deckyard.render.control.schema import render_requests
from deckyard.workspaces.schema import api_tokens, audit_events, idempotency_keys
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually

pytestmark = pytest.mark.postgres

SERIALIZATION_FAILURE = """
CREATE FUNCTION dy_fault() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('dy_fault_seq') = 1 THEN
        RAISE EXCEPTION 'provoked serialization failure' USING ERRCODE = '40001';
    END IF;
    RETURN NULL;
END $$
"""

# Takes lock K1, waits until the other session (holding K2) asks for K1, then asks for K2:
# a lock cycle that PostgreSQL's deadlock detector breaks by aborting this side (50 ms timeout
# here, 60 s on the other side). The sequence is not transactional, so only the first try runs it.
DEADLOCK = """
CREATE FUNCTION dy_fault() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('dy_fault_seq') = 1 THEN
        PERFORM set_config('deadlock_timeout', '50ms', true);
        PERFORM pg_advisory_xact_lock({k1});
        WHILE NOT EXISTS (
            SELECT 1 FROM pg_locks
            WHERE locktype = 'advisory' AND objid = {k1} AND objsubid = 1 AND NOT granted
        ) LOOP
            PERFORM pg_sleep(0.01);
        END LOOP;
        PERFORM pg_advisory_xact_lock({k2});
    END IF;
    RETURN NULL;
END $$
"""


@dataclass
class Fault:
    """A trigger on one table whose first firing fails the statement it belongs to."""

    url: str
    table: str

    def install(self, function: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE SEQUENCE dy_fault_seq")
            conn.execute(function)
            conn.execute(
                f"CREATE TRIGGER dy_fault BEFORE INSERT OR UPDATE OR DELETE ON {self.table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION dy_fault()"
            )

    def firings(self) -> int:
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("SELECT last_value, is_called FROM dy_fault_seq").fetchone()
        assert row is not None
        return int(row[0]) if row[1] else 0


async def rows(app: FastAPI, table: object, *where: object) -> int:
    async with app.state.db.read_connection() as conn:
        stmt = select(func.count()).select_from(table)  # type: ignore[arg-type]
        return int((await conn.execute(stmt.where(*where))).scalar_one())


@asynccontextmanager
async def app_with_fault(url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with running_app(url, background_loops=False) as (app, client):
        yield app, client


Route = Callable[[FastAPI, httpx.AsyncClient, dict[str, str]], Awaitable[None]]


async def create_token(app: FastAPI, client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    r = await client.post("/v1/tokens", json={"label": "ci"}, headers=alice)
    assert r.status_code == 201, r.text
    assert await rows(app, api_tokens, api_tokens.c.label == "ci") == 1


async def revoke_token(app: FastAPI, client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    [mine] = (await client.get("/v1/tokens", headers=alice)).json()
    r = await client.delete(f"/v1/tokens/{mine['id']}", headers=alice)
    assert r.status_code == 204, r.text
    assert (await client.get("/v1/tokens", headers=alice)).status_code == 401


async def create_deck(app: FastAPI, client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    r = await client.post("/v1/decks", json=json_deck(), headers=alice)
    assert r.status_code == 201, r.text
    assert await rows(app, decks) == 1


async def idempotent_post(app: FastAPI, client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    keyed = {**alice, "idempotency-key": "k-1"}
    first = await client.post("/v1/decks", json=json_deck(), headers=keyed)
    again = await client.post("/v1/decks", json=json_deck(), headers=keyed)
    assert first.status_code == again.status_code == 201, (first.text, again.text)
    assert first.json() == again.json()
    assert await rows(app, decks) == 1
    assert await rows(app, idempotency_keys) == 1


async def audited_write(app: FastAPI, client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    r = await client.post("/v1/decks", json=json_deck(), headers=alice)
    assert r.status_code == 201, r.text
    assert await rows(app, audit_events, audit_events.c.path == "/v1/decks") == 1


async def rename_page(app: FastAPI, client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    deck = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()
    r = await client.post(
        f"/v1/decks/{deck['id']}/pages/01-hello/rename", json={"name": "02-hi"}, headers=alice
    )
    assert r.status_code == 200, r.text
    assert [p["page"] for p in r.json()["pages"]] == ["02-hi"]


async def request_screenshot(
    app: FastAPI, client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    body = {"html": "<p>x</p>", "width": 100, "height": 50}
    r = await client.post("/v1/screenshots", json=body, headers=alice)
    assert r.status_code == 202, r.text
    assert await rows(app, render_requests, render_requests.c.id == r.json()["id"]) == 1
    assert await rows(app, render_requests) == 1
    assert await rows(app, jobs) == 0


ROUTES: dict[str, tuple[str, Route]] = {
    "token create": ("api_tokens", create_token),
    "token revoke": ("api_tokens", revoke_token),
    "deck create": ("decks", create_deck),
    "idempotency key": ("idempotency_keys", idempotent_post),
    "audit record": ("audit_events", audited_write),
    "page rename": ("pages", rename_page),
    "screenshot request": ("render_requests", request_screenshot),
}


@pytest.mark.parametrize("name", list(ROUTES))
async def test_a_serialization_failure_on_an_api_write_is_retried(
    pg_schema_url: str, name: str
) -> None:
    table, route = ROUTES[name]
    async with app_with_fault(pg_schema_url) as (app, client):
        alice = await make_token(app, "alice")
        fault = Fault(pg_schema_url, table)
        fault.install(SERIALIZATION_FAILURE)
        before = app.state.db.stats.write_conflicts
        await route(app, client, alice)
        assert fault.firings() >= 2, "the faulty statement never ran again"
        assert app.state.db.stats.write_conflicts == before + 1


async def test_a_deadlocked_deck_create_is_retried(pg_schema_url: str) -> None:
    k1, k2 = random.sample(range(1, 2**31), 2)
    async with app_with_fault(pg_schema_url) as (app, client):
        alice = await make_token(app, "alice")
        fault = Fault(pg_schema_url, "decks")
        fault.install(DEADLOCK.format(k1=k1, k2=k2))
        other = await psycopg.AsyncConnection.connect(pg_schema_url, autocommit=True)
        try:
            await other.execute("SET deadlock_timeout = '60s'")
            await other.execute("SELECT pg_advisory_lock(%s)", (k2,))

            async def k1_taken() -> bool:
                async with app.state.db.read_connection() as conn:
                    held = await conn.execute(
                        text(
                            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
                            " AND objid = :k AND objsubid = 1 AND granted"
                        ),
                        {"k": k1},
                    )
                    return held.first() is not None

            async def take_k1_once_the_request_holds_it() -> None:
                await eventually(k1_taken, timeout=30)
                await other.execute("SELECT pg_advisory_lock(%s)", (k1,))

            cycle = asyncio.create_task(take_k1_once_the_request_holds_it())
            before = app.state.db.stats.write_conflicts
            r = await client.post("/v1/decks", json=json_deck(), headers=alice)
            await cycle
            assert r.status_code == 201, r.text
            assert await rows(app, decks) == 1
            assert fault.firings() >= 2
            assert app.state.db.stats.write_conflicts == before + 1
        finally:
            await other.execute("SELECT pg_advisory_unlock_all()")
            await other.close()
