"""Hostile input answered with a 4xx in the one error shape, and nothing stored (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from deckyard.render.control.store import request_counts
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import MANIFEST, counts, make_zip
from tests.helpers.eventually import eventually, settled

ZIP = {"content-type": "application/zip"}
PAGE = {"pages/01-a.md": b"# A"}
HUGE_IDS = [2**63, -(2**63) - 1, 10**30]
ID_ROUTES = [
    ("GET", "/v1/jobs/{id}"),
    ("POST", "/v1/jobs/{id}/cancel"),
    ("POST", "/v1/jobs/{id}/retry"),
    ("GET", "/v1/jobs/{id}/events"),
    ("GET", "/v1/jobs/{id}/artifact"),
    ("GET", "/v1/tasks/{id}"),
    ("GET", "/v1/tasks/{id}/events"),
    ("POST", "/v1/tasks/{id}/cancel"),
    ("GET", "/v1/decks/{id}"),
    ("GET", "/v1/decks/{id}/pages/p"),
    ("GET", "/v1/decks/{id}/pages/p/versions"),
    ("PUT", "/v1/decks/{id}/pages/p"),
    ("POST", "/v1/decks/{id}/pages/p/validate"),
    ("POST", "/v1/decks/{id}/pages/p/screenshot"),
    ("POST", "/v1/decks/{id}/build"),
    ("POST", "/v1/decks/{id}/export"),
    ("POST", "/v1/decks/{id}/publish"),
    ("GET", "/v1/jobs?before={id}"),
]


def assert_error_shape(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, (r.request.url, r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    error: dict[str, Any] = r.json()["error"]
    assert error["code"] and error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error


async def test_item9_ids_out_of_range_are_422_on_every_route(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        for method, template in ID_ROUTES:
            for big in HUGE_IDS:
                r = await client.request(
                    method, template.format(id=big), headers=alice, json={"text": "x"}
                )
                # a negative id does not match the route's path at all: 404
                assert_error_shape(r, 404 if big < 0 and "?" not in template else 422)
        assert (await client.get(f"/v1/jobs/{2**63 - 1}", headers=alice)).status_code == 404


async def test_item9_dashboard_ids_out_of_range(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        for path in ("/ui/jobs/{id}", "/ui/tasks/{id}", "/ui/jobs?before={id}"):
            r = await client.get(path.format(id=2**63), headers=alice)
            assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])


async def test_item10_long_zip_entry_name_is_refused(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        data = make_zip({"deck.toml": MANIFEST, **PAGE, "assets/" + "a" * 494: b"x"})
        for path in ("/v1/decks/zip", "/v1/validate"):
            r = await client.post(path, content=data, headers={**alice, **ZIP})
            assert_error_shape(r, 422, "DECK_BAD_NAME")
        assert await counts(app) == (0, 0, 0, 0)


async def test_item11_deep_toml_and_deep_json_are_refused(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        deep_toml = b"x = " + b"[" * 1000 + b"]" * 1000 + b"\n"
        data = make_zip({"deck.toml": MANIFEST + deep_toml, **PAGE})
        for path in ("/v1/decks/zip", "/v1/validate"):
            r = await client.post(path, content=data, headers={**alice, **ZIP})
            assert_error_shape(r, 422, "DECK_MANIFEST_SYNTAX")
        deep_json = b"[" * 100_000
        r = await client.post("/v1/decks", content=deep_json, headers=alice)
        assert_error_shape(r, 422, "DECK_JSON_SYNTAX")
        r = await client.post("/v1/validate", content=deep_json, headers=alice)
        assert_error_shape(r, 422)
        nested = json.dumps({"manifest": {"title": "T"}, "pages": []})
        r = await client.post(
            "/v1/decks",
            content=nested[:-1] + ',"x":' + "[" * 5000 + "]" * 5000 + "}",
            headers=alice,
        )
        assert_error_shape(r, 422)
        assert await counts(app) == (0, 0, 0, 0)


async def test_item12_nul_in_entry_name_is_refused(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        # zipfile would cut the name at the NUL while writing: patch it into the raw bytes.
        placeholder = make_zip({"deck.toml": MANIFEST, **PAGE, "assets/a\x01b.txt": b"x"})
        data = placeholder.replace(b"assets/a\x01b.txt", b"assets/a\x00b.txt")
        assert data.count(b"assets/a\x00b.txt") == 2
        for path in ("/v1/decks/zip", "/v1/validate"):
            r = await client.post(path, content=data, headers={**alice, **ZIP})
            assert_error_shape(r, 422, "DECK_BAD_NAME")
        assert await counts(app) == (0, 0, 0, 0)


async def test_item13_http_errors_use_the_error_shape(db_url: str) -> None:
    async with running_app(db_url, api_max_body_bytes=2000) as (app, client):
        alice = await make_token(app, "alice")
        big = await client.post("/v1/decks", content=b"{" + b" " * 5000 + b"}", headers=alice)
        assert_error_shape(big, 413, "PAYLOAD_TOO_LARGE")
        r = await client.get("/v1/decks/zip", headers=alice)
        assert_error_shape(r, 405, "METHOD_NOT_ALLOWED")
        assert r.headers["allow"] == "POST"
        r = await client.put("/v1/jobs/1", headers=alice)
        assert_error_shape(r, 405, "METHOD_NOT_ALLOWED")
        assert r.headers["allow"] == "GET, HEAD"
        r = await client.delete("/v1/jobs", headers=alice)
        assert {m.strip() for m in r.headers["allow"].split(",")} == {"GET", "HEAD"}
        r = await client.patch("/v1/decks/1/pages/p", headers=alice)
        assert_error_shape(r, 405, "METHOD_NOT_ALLOWED")
        assert {m.strip() for m in r.headers["allow"].split(",")} >= {"GET", "PUT"}
        assert await counts(app) == (0, 0, 0, 0)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_item13_unhandled_error_is_500_in_the_error_shape(db_url: str) -> None:
    async with running_app(db_url) as (app, _client):
        alice = await make_token(app, "alice")

        async def broken(*_a: object, **_k: object) -> None:
            raise RuntimeError("boom")

        app.state.decks.decks = broken
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            r = await client.get("/v1/decks", headers=alice)
        error = assert_error_shape(r, 500, "INTERNAL_ERROR")
        assert "boom" not in error["message"]


@pytest.mark.chromium
@pytest.mark.processes
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_item15_validate_stores_no_artefact(db_url: str, tmp_path: Path) -> None:
    async with running_app(db_url, renderers=1, data_dir=tmp_path) as (app, client):
        alice = await make_token(app, "alice")
        store = app.state.render.store
        await eventually(app.state.decks.validator.gateway.renderer_live, timeout=60)
        page = await client.post(
            "/v1/validate", json={"kind": "md", "source": "# Fine"}, headers=alice
        )
        assert page.status_code == 200 and page.json()["valid"] is True, page.text
        deck = make_zip({"deck.toml": MANIFEST, **PAGE, "pages/02-b.html": b"<h1>B</h1>"})
        zipped = await client.post("/v1/validate", content=deck, headers={**alice, **ZIP})
        assert zipped.status_code == 200 and zipped.json()["valid"] is True, zipped.text
        assert await counts(app) == (0, 0, 0, 0)
        assert await app.state.runtime.list() == []

        async def left() -> list[object]:
            async with app.state.db.read_connection() as conn:
                return [*await store.keys(), *await request_counts(conn)]

        # the answers do not wait for the deletes: no object (no picture, no page document)
        # and no row (render requests, attempts) once they are done
        assert await settled(left) == []


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_item6_killed_connections_answer_503_or_work(db_url: str) -> None:
    import asyncio

    import psycopg
    from sqlalchemy import text

    from tests.conftest import PG_URL

    async with running_app(db_url, background_loops=False) as (app, client):
        alice = await make_token(app, "alice")
        assert (await client.get("/v1/jobs", headers=alice)).status_code == 200
        answers = []
        for _ in range(4):
            # the app's own pooled connections, held together so that each is a separate one
            together = asyncio.Barrier(3)

            async def pid(barrier: asyncio.Barrier) -> int:
                async with app.state.db.read_connection() as conn:
                    found = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
                    await barrier.wait()
                    return int(found)

            pids = set(await asyncio.gather(*(pid(together) for _ in range(3))))
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                for backend in pids:
                    conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
            r = await client.get("/v1/jobs", headers=alice)
            answers.append(r.status_code)
            assert r.status_code in (200, 503), (r.status_code, r.text)
            if r.status_code == 503:
                assert_error_shape(r, 503, "DATABASE_UNAVAILABLE")
                assert r.headers["retry-after"] == "1"
        assert (await client.get("/v1/jobs", headers=alice)).status_code == 200
        assert 503 in answers, answers
