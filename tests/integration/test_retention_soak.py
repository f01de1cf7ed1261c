"""A small soak: screenshots through the API with a short retention, then the tables' row counts
and the artefact store return to where they started (the 1 000-screenshot version is
`bench/retention_soak.py`)."""

from __future__ import annotations

import asyncio

import pytest

from deckyard.decks.retention import Footprint, Retention
from deckyard.jobs import Runtime
from deckyard.render.control.service import RenderService
from tests.helpers.api import make_token, running_app
from tests.helpers.eventually import eventually

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

SHOTS = 12
SHORT = {
    "job_retention_seconds": 3.0,
    "job_prune_interval_seconds": 0.2,
    "render_retention_seconds": 1.0,
    "task_retention_seconds": 1.0,
    "retention_prune_interval_seconds": 0.2,
    "artifact_sweep_interval_seconds": 0.2,
    "artifact_sweep_grace_seconds": 2.0,
    "job_lease_seconds": 10.0,
    "job_heartbeat_interval_seconds": 1.0,
}


def page(i: int) -> str:
    return f"<!doctype html><body style='margin:0;background:#fff'><h1>shot {i}</h1></body>"


async def test_screenshots_with_a_short_retention_leave_nothing_behind(db_url: str) -> None:
    async with running_app(db_url, renderers=1, **SHORT) as (app, client):
        alice = await make_token(app, "alice")
        retention: Retention = app.state.node.retention
        start = await retention.footprint()
        rt: Runtime = app.state.runtime
        service: RenderService = app.state.render
        waits = []
        for i in range(SHOTS):
            body = {"html": page(i), "width": 200, "height": 100}
            r = await client.post("/v1/screenshots", json=body, headers=alice)
            assert r.status_code == 202, r.text
            # waiting from the start: a finished render is pruned after the (short) retention
            wait = service.wait_for_terminal(r.json()["id"], timeout=120)
            waits.append(asyncio.create_task(wait))
        done = await asyncio.gather(*waits)
        assert all(d.status == "succeeded" for d in done), [d.error_message for d in done]
        assert len({d.id for d in done}) == SHOTS

        seen: list[Footprint] = []

        async def back_to_start() -> Footprint | None:
            now = await retention.footprint()
            seen[:] = [now]
            # the sweep may also delete an unreferenced object that was there before (a store
            # shared with an earlier test in the session): back to start or below
            same = now.rows == start.rows and now.store_objects <= start.store_objects
            return now if same else None

        try:
            end = await eventually(back_to_start, timeout=60, what="rows and store back to start")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: started at {start}, last seen {seen}") from None
        assert end.store_bytes <= start.store_bytes
        # the rows were there and retention is what removed them; no job was ever made for them
        assert retention.stats.render_requests == SHOTS
        assert rt.metrics.pruned == 0
        assert retention.sweeper.stats.objects_deleted + retention.stats.artifacts >= SHOTS
