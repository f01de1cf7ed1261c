"""A screenshot's render request names its page by content key: stored once at
`POST /v1/screenshots`, kept from the artefact sweep while a request names it, deleted again
when the submission is refused.

No loops run: the requests stay pending, so only the request's input, the store and the sweep
are looked at.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import func, select

from deckyard.artifacts import ArtifactStore
from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.control.requests import document_object_key, request_forget
from deckyard.render.control.schema import render_attempts, render_requests
from tests.helpers.api import make_token, running_app

PAGE = "<!doctype html><title>kept</title><p>" + "x" * 50_000 + "</p>"
QUIET = {"background_loops": False, "artifact_sweep_grace_seconds": 0.001}


def key_of(html: str) -> str:
    return document_object_key(hashlib.sha256(html.encode("utf-8")).hexdigest())


async def test_the_request_names_the_page_by_key(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        body = {"html": PAGE, "width": 320, "height": 200}
        created = await client.post("/v1/screenshots", json=body, headers=alice)
        assert created.status_code == 202, created.text
        render_id = created.json()["id"]
        shown = await client.get(f"/v1/renders/{render_id}", headers=alice)
        assert shown.status_code == 200, shown.text
        # the page is not in the render's answers
        assert "x" * 1000 not in created.text and "x" * 1000 not in shown.text
        request = await app.state.render.request(render_id)
        assert request is not None and request.input is not None
        assert request.input["document_key"] == hashlib.sha256(PAGE.encode()).hexdigest()
        assert "document" not in request.input
        assert request.input["width"] == 320 and request.input["height"] == 200
        store: ArtifactStore = app.state.render.store
        assert await store.get(key_of(PAGE)) == PAGE.encode()
        # the same input hashes the same by value and by key: the dedupe joins the request
        again = await client.post("/v1/screenshots", json=body, headers=alice)
        assert again.json()["id"] == render_id
        digest = ScreenshotSpec.model_validate(body).input_hash()
        assert request.input_hash == digest
        assert request.dedupe_key == f"alice:{digest}"


async def test_the_sweep_keeps_a_page_while_a_request_names_it(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        created = await client.post("/v1/screenshots", json={"html": PAGE}, headers=alice)
        assert created.status_code == 202, created.text
        render_id = created.json()["id"]
        store: ArtifactStore = app.state.render.store
        stray = "<p>named by nothing</p>"
        await store.put(key_of(stray), stray.encode())
        sweeper = app.state.node.retention.sweeper  # the sweep's check, without its grace age
        assert await sweeper.delete_unreferenced([key_of(stray), key_of(PAGE)]) == 1
        assert await store.get(key_of(stray)) is None
        assert await store.get(key_of(PAGE)) == PAGE.encode()  # the pending request names it
        cancelled = await client.post(f"/v1/renders/{render_id}/cancel", headers=alice)
        assert cancelled.json()["status"] == "cancelled"
        # an ended request still names it (it can be retried) until retention prunes it
        assert await sweeper.delete_unreferenced([key_of(PAGE)]) == 0
        assert await store.get(key_of(PAGE)) == PAGE.encode()
        await request_forget(app.state.db, render_id)
        assert await sweeper.delete_unreferenced([key_of(PAGE)]) == 1
        assert await store.get(key_of(PAGE)) is None


async def test_a_refused_screenshot_leaves_no_page(db_url: str) -> None:
    async with running_app(db_url, render_workspace_queue_limit=1, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        first = await client.post("/v1/screenshots", json={"html": PAGE}, headers=alice)
        assert first.status_code == 202, first.text
        refused_page = PAGE.replace("kept", "refused")
        refused = await client.post("/v1/screenshots", json={"html": refused_page}, headers=alice)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "RENDER_QUEUE_FULL"
        store: ArtifactStore = app.state.render.store
        assert await store.get(key_of(refused_page)) is None
        # a refused page that an active request names stays
        same = await client.post(
            "/v1/screenshots", params={"dedupe": "false"}, json={"html": PAGE}, headers=alice
        )
        assert same.status_code == 429
        assert await store.get(key_of(PAGE)) == PAGE.encode()


async def test_a_render_whose_page_was_swept_is_not_retried(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        created = await client.post("/v1/screenshots", json={"html": PAGE}, headers=alice)
        assert created.status_code == 202, created.text
        render_id = created.json()["id"]
        cancelled = await client.post(f"/v1/renders/{render_id}/cancel", headers=alice)
        assert cancelled.json()["status"] == "cancelled"
        # what a retry meets once the sweep took the page of an ended render
        store: ArtifactStore = app.state.render.store
        assert await store.exists(key_of(PAGE))
        assert await store.delete(key_of(PAGE))
        assert not await store.exists(key_of(PAGE))
        retried = await client.post(f"/v1/renders/{render_id}/retry", headers=alice)
        assert retried.status_code == 410, retried.text
        assert retried.json()["error"]["code"] == "RENDER_INPUT_GONE"
        shown = (await client.get(f"/v1/renders/{render_id}", headers=alice)).json()
        assert shown["status"] == "cancelled" and shown["attempts"] == 0
        async with app.state.db.read_connection() as conn:
            requests = (
                await conn.execute(select(func.count()).select_from(render_requests))
            ).scalar_one()
            attempts = (
                await conn.execute(select(func.count()).select_from(render_attempts))
            ).scalar_one()
        assert (requests, attempts) == (1, 0)  # no render was asked for
