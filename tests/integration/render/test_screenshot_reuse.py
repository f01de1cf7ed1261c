"""A retried screenshot job takes over its live or succeeded render request (issue 14).

After a connection loss, attempt 2 of a job used to open a second render request although the
first had succeeded: a second render and an artefact no row points at.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sqlalchemy import func, select, update

from deckyard.jobs.schema import jobs
from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.control.schema import render_requests
from deckyard.render.control.screenshots import screenshot_payload
from tests.helpers.api import running_app


@pytest.mark.parametrize("shape", ["by_key", "by_value"])
async def test_a_retried_job_reuses_its_render_request(db_url: str, shape: str) -> None:
    # no loops: nothing recovers the hand-made running job or renders the request
    async with running_app(db_url, background_loops=False) as (app, _client):
        spec = ScreenshotSpec.model_validate({"html": "<p>once</p>", "width": 64, "height": 32})
        if shape == "by_key":  # what POST /v1/screenshots enqueues
            payload, _ = await screenshot_payload(app.state.render.store, spec, dedupe=True)
        else:  # a job enqueued by an earlier version, still in the queue
            payload = {"spec": spec.model_dump(mode="json"), "dedupe": True}
        job = await app.state.runtime.enqueue(
            "screenshot", payload, queue="parked", workspace_id="alice"
        )
        db = app.state.db
        async with db.write_transaction() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == job.id).values(status="running"))
        ctx = SimpleNamespace(id=job.id, job=job, payload=payload, deadline_at=None)
        handler = app.state.render.handler
        first = await handler.open_request(ctx)
        again = await handler.open_request(ctx)
        assert again.id == first.id
        async with db.write_transaction() as conn:
            await conn.execute(
                update(render_requests)
                .where(render_requests.c.id == first.id)
                .values(status="succeeded", result={"artifact_key": "k"})
            )
        retried = await handler.open_request(ctx)
        assert retried.id == first.id
        async with db.read_connection() as conn:
            count = (
                await conn.execute(select(func.count()).select_from(render_requests))
            ).scalar_one()
        assert count == 1
        async with db.read_connection() as conn:
            row = (await conn.execute(select(render_requests.c.input))).one()
        assert "document" not in row.input and row.input["document_key"]
