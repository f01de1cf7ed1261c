"""A retried job takes back its live or succeeded render request (issue 14).

After a connection loss, attempt 2 of a job used to open a second render request although the
first had succeeded: a second render and an artefact no row points at. A job's one-page request
(a deck page's check, `RenderGateway.run`) is opened with the job as its parent; opening it
again for the same input, as the job's next attempt does, answers the same request.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from deckyard.jobs.schema import jobs
from deckyard.render.control.models import RequestStatus, ScreenshotSpec
from deckyard.render.control.schema import render_requests
from tests.helpers.api import running_app


@pytest.mark.parametrize("dedupe", [False, True])
async def test_a_retried_job_reuses_its_render_request(db_url: str, dedupe: bool) -> None:
    # no loops: nothing recovers the hand-made running job or renders the request
    async with running_app(db_url, background_loops=False) as (app, _client):
        spec = ScreenshotSpec.model_validate({"html": "<p>once</p>", "width": 64, "height": 32})
        job = await app.state.runtime.enqueue(
            "test.parked", {}, queue="parked", workspace_id="alice"
        )
        db = app.state.db
        async with db.write_transaction() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == job.id).values(status="running"))
        service = app.state.render

        async def open_for_job() -> int:
            request = await service.submit(
                spec, workspace_id="alice", dedupe=dedupe, parent_job_id=job.id
            )
            assert request.parent_job_id == job.id
            return int(request.id)

        first = await open_for_job()
        assert await open_for_job() == first  # live: taken back
        async with db.write_transaction() as conn:
            await conn.execute(
                update(render_requests)
                .where(render_requests.c.id == first)
                .values(status="succeeded", result={"artifact_key": "k"})
            )
        assert await open_for_job() == first  # succeeded: taken back, not rendered again
        async with db.read_connection() as conn:
            count = (
                await conn.execute(select(func.count()).select_from(render_requests))
            ).scalar_one()
            row = (await conn.execute(select(render_requests.c.input))).one()
        assert count == 1
        assert "document" not in row.input and row.input["document_key"]

        # a failed request is not reused: the job's next attempt renders again
        async with db.write_transaction() as conn:
            await conn.execute(
                update(render_requests)
                .where(render_requests.c.id == first)
                .values(status="failed", result=None, error_code="RENDER_RESULT_LOST")
            )
        second = await open_for_job()
        assert second != first
        fresh = await service.request(second)
        assert fresh is not None and fresh.status is RequestStatus.PENDING
