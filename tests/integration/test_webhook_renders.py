"""`render.finished` of a screenshot, a render request no job opened, on SQLite and PostgreSQL:
the render relay announces each once, across restarts; validations and a job's renders are not
its to announce, and the job relay does not take its events for its own mark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deckyard.api.auth import token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.db import Database
from deckyard.jobs import JobContext, Runtime
from deckyard.render.control.models import RequestStatus, ScreenshotSpec
from deckyard.render.control.service import RenderService
from deckyard.webhooks.relay import JobRelay, Relay, render_source
from deckyard.webhooks.service import WebhookService
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings


async def public_resolver(host: str, port: int) -> list[str]:
    """Every name is a public address (no DNS in tests)."""
    return ["93.184.216.34"]


def spec(n: int) -> ScreenshotSpec:
    return ScreenshotSpec.model_validate({"html": f"<p>{n}</p>", "width": 64, "height": 64})


async def test_each_finished_screenshot_is_announced_once(db: Database, tmp_path: Path) -> None:
    settings = fast_settings(webhook_relay_lag_seconds=2.0, data_dir=tmp_path)
    runtime = Runtime(db, settings=settings, migrate=False)
    render = RenderService(db, runtime, settings, supervise=False)
    hooks = WebhookService(
        db,
        runtime,
        settings,
        SYSTEM_CLOCK,
        resolver=public_resolver,
        renders=render.kept_finished_after,
    )
    for workspace in ("alice", "bob"):
        await token_create(db, workspace, SYSTEM_CLOCK.now())
    endpoint = (
        await hooks.create("alice", "https://hooks.example.com/r", ["render.finished"], None)
    ).endpoint
    bob = (
        await hooks.create("bob", "https://hooks.example.com/r", ["job.finished"], None)
    ).endpoint

    async def cancelled(request_id: int) -> None:
        await render.cancel_request(request_id)
        done = await render.request(request_id)
        assert done is not None and done.status is RequestStatus.CANCELLED

    # No renderer runs: every render stays queued until cancelled.
    shot = await render.submit(spec(1), workspace_id="alice")
    check = await render.submit(spec(2), workspace_id="alice", capture=False, dedupe=False)
    for_bob = await render.submit(spec(3), workspace_id="bob")

    opened: list[int] = []

    @runtime.handler("opens", queue="q", max_attempts=1)
    async def opens(ctx: JobContext) -> dict[str, Any]:
        request = await render.submit(spec(4), workspace_id="alice", parent_job_id=ctx.id)
        opened.append(request.id)
        return {}

    async with runtime:
        runtime.worker(["q"], concurrency=1)
        job = await runtime.enqueue("opens", {}, queue="q", workspace_id="alice")
        await runtime.wait(job.id, timeout=30)
    for request_id in (shot.id, check.id, for_bob.id, *opened):
        await cancelled(request_id)

    await hooks.relay_tick()
    found = await hooks.deliveries("alice", endpoint.id, limit=50)
    assert [(d.event_type, d.event_id.rsplit(":", 1)[0]) for d in found] == [
        ("render.finished", f"render.finished:render-{shot.id}")
    ]
    data = found[0].payload["data"]
    assert data["render"]["id"] == shot.id
    assert data["render"]["status"] == "cancelled"
    assert data["render"]["url"] == f"/v1/renders/{shot.id}"
    assert "artifact_url" not in data
    assert await hooks.deliveries("bob", bob.id, limit=50) == []  # bob wants job.finished only

    # A second sweep, and relays that start afresh (a restart, another node), add nothing.
    await hooks.relay_tick()
    restarted = Relay(
        db, runtime, settings, SYSTEM_CLOCK, render_source(render.kept_finished_after)
    )
    await restarted.tick()
    assert len(await hooks.deliveries("alice", endpoint.id, limit=50)) == 1
    # The job relay's mark is its own events' newest: a render's event is not one of them.
    jobs = JobRelay(db, runtime, settings, SYSTEM_CLOCK)
    async with db.read_connection() as conn:
        await jobs._start(conn, await hooks.endpoints("alice"))
    assert jobs.mark is not None
    assert jobs.mark < found[0].event_at

    later = await render.submit(spec(5), workspace_id="alice")
    await cancelled(later.id)

    async def announced() -> bool:
        await restarted.tick()
        return len(await hooks.deliveries("alice", endpoint.id, limit=50)) == 2

    await eventually(announced, what="the later render announced")
    await render.stop()
