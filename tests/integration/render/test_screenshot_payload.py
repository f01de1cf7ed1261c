"""A screenshot job names its page by content key: stored once at `POST /v1/screenshots`, kept
from the artefact sweep while the job is active, deleted again when the submission is refused.

No loops run: the jobs stay pending, so only the payload, the store and the sweep are looked at.
"""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest
from sqlalchemy import func, select

from deckyard.artifacts import ArtifactStore
from deckyard.jobs import JobError, Runtime
from deckyard.jobs.schema import jobs
from deckyard.render.control.inputs import document_object_key
from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.control.schema import render_requests
from tests.helpers.api import make_token, running_app

PAGE = "<!doctype html><title>kept</title><p>" + "x" * 50_000 + "</p>"
QUIET = {"background_loops": False, "artifact_sweep_grace_seconds": 0.001}


def key_of(html: str) -> str:
    return document_object_key(hashlib.sha256(html.encode("utf-8")).hexdigest())


async def test_the_job_payload_names_the_page_by_key(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        body = {"html": PAGE, "width": 320, "height": 200}
        created = await client.post("/v1/screenshots", json=body, headers=alice)
        assert created.status_code == 202, created.text
        job = (await client.get(f"/v1/jobs/{created.json()['id']}", headers=alice)).json()
        render = job["payload"]["render"]
        assert render["document_key"] == hashlib.sha256(PAGE.encode()).hexdigest()
        assert render["width"] == 320 and render["height"] == 200
        assert "x" * 1000 not in json.dumps(job)  # the page is not in the job, nor its answer
        store: ArtifactStore = app.state.render.store
        assert await store.get(key_of(PAGE)) == PAGE.encode()
        # the same input hashes the same by value and by key: the dedupe joins the job
        again = await client.post("/v1/screenshots", json=body, headers=alice)
        assert again.json()["id"] == job["id"]
        async with app.state.db.read_connection() as conn:
            row = (await conn.execute(select(jobs.c.dedupe_key))).one()
        assert (
            row.dedupe_key == f"screenshot:alice:{ScreenshotSpec.model_validate(body).input_hash()}"
        )


async def test_the_sweep_keeps_a_page_while_its_job_is_active(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        created = await client.post("/v1/screenshots", json={"html": PAGE}, headers=alice)
        assert created.status_code == 202, created.text
        store: ArtifactStore = app.state.render.store
        stray = "<p>named by nothing</p>"
        await store.put(key_of(stray), stray.encode())
        sweeper = app.state.node.retention.sweeper  # the sweep's check, without its grace age
        assert await sweeper.delete_unreferenced([key_of(stray), key_of(PAGE)]) == 1
        assert await store.get(key_of(stray)) is None
        assert await store.get(key_of(PAGE)) == PAGE.encode()  # the pending job names it
        rt: Runtime = app.state.runtime
        await rt.cancel(created.json()["id"])
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
        # a refused page that an active job names stays
        same = await client.post(
            "/v1/screenshots", params={"dedupe": "false"}, json={"html": PAGE}, headers=alice
        )
        assert same.status_code == 429
        assert await store.get(key_of(PAGE)) == PAGE.encode()


async def test_a_job_whose_page_was_swept_fails_saying_so(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        created = await client.post("/v1/screenshots", json={"html": PAGE}, headers=alice)
        assert created.status_code == 202, created.text
        job = await app.state.runtime.get(created.json()["id"])
        handler = app.state.render.handler
        ctx = SimpleNamespace(id=job.id, job=job, payload=job.payload, deadline_at=None)
        # what a retry meets once the sweep took the page of an ended job
        store: ArtifactStore = app.state.render.store
        assert await store.exists(key_of(PAGE))
        assert await store.delete(key_of(PAGE))
        assert not await store.exists(key_of(PAGE))
        with pytest.raises(JobError) as caught:
            await handler.open_request(ctx)
        assert caught.value.code == "RENDER_INPUT_GONE"
        assert not caught.value.retryable
        async with app.state.db.read_connection() as conn:
            count = (
                await conn.execute(select(func.count()).select_from(render_requests))
            ).scalar_one()
        assert count == 0  # no render was asked for
