"""Refusals the framework around the routes answers: undecodable and malformed bodies, and a
database lost under the middleware; each documented, in the error shape (issue 30)."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from tests.conftest import PG_URL
from tests.helpers.api import make_token, running_app
from tests.integration.test_hostile_input import assert_error_shape

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_body_that_is_not_utf8_is_a_documented_422(db_url: str) -> None:
    async with running_app(db_url, background_loops=False) as (app, client):
        alice = await make_token(app, "alice")
        doc = (await client.get("/openapi.json")).json()
        r = await client.post("/v1/tokens", content=b'{"label": "\xff\xfe"}', headers=alice | JSON)
    error = assert_error_shape(r, 422, "INVALID_INPUT")
    assert error["field"] == "body"
    assert "not UTF-8" in error["message"] and "0xff" in error["message"]
    assert "422" in doc["paths"]["/v1/tokens"]["post"]["responses"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_malformed_json_names_its_line_and_column_not_an_offset(db_url: str) -> None:
    async with running_app(db_url, background_loops=False) as (app, client):
        alice = await make_token(app, "alice")
        one_line = await client.post("/v1/tokens", content=b'{"label": 1,}', headers=alice | JSON)
        two_lines = await client.post(
            "/v1/tokens", content=b'{\n  "label": }', headers=alice | JSON
        )
    error = assert_error_shape(one_line, 422, "INVALID_INPUT")
    assert error["field"] == "body"
    assert error["message"] == (
        "body: not valid JSON: Expecting property name enclosed in double quotes"
        " at line 1, column 13"
    )
    assert error["problems"] == [{"field": "body", "message": error["message"][6:]}]
    error = assert_error_shape(two_lines, 422, "INVALID_INPUT")
    assert error["field"] == "body" and "line 2, column 12" in error["message"]


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_database_lost_under_the_middleware_is_a_503_logged_in_one_line(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`IdempotencyMiddleware` resolves the token before any route runs. A lost connection
    there used to reach Starlette's last handler, which answers and then re-raises: the
    server logged a full traceback (with the SQL) for every such 503."""

    async def kill_pooled(app: FastAPI) -> None:
        together = asyncio.Barrier(3)

        async def pid() -> int:
            async with app.state.db.read_connection() as conn:
                found = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
                await together.wait()
                return int(found)

        pids = set(await asyncio.gather(*(pid() for _ in range(3))))
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for backend in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (backend,))

    async with running_app(db_url, background_loops=False) as (app, client):
        alice = await make_token(app, "alice")
        answers = []
        caplog.set_level(logging.WARNING)
        for n in range(4):
            await kill_pooled(app)
            headers = alice | {"idempotency-key": f"key-{n}"}
            r = await client.post("/v1/tokens", json={"label": "x"}, headers=headers)
            answers.append(r.status_code)
            assert r.status_code in (201, 503), (r.status_code, r.text)
            if r.status_code == 503:
                assert_error_shape(r, 503, "DATABASE_UNAVAILABLE")
                assert r.headers["retry-after"] == "1"
        assert 503 in answers, answers
    lost = [rec for rec in caplog.records if "database connection lost" in rec.getMessage()]
    assert len(lost) == answers.count(503), [rec.getMessage() for rec in lost]
    for record in lost:
        message = record.getMessage()
        assert record.exc_info is None and "\n" not in message, message
        assert "POST /v1/tokens" in message and "terminating connection" in message
        assert "token_hash" not in message
