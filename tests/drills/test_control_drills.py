"""Seed 004's five screenshot lifecycle drills against real renderer processes and Chromium.

A screenshot is a one-page render request (`RenderService.submit`); drill 2's is opened by a job
(as a deck page's check is, `RenderGateway.run`) and cancelled through the job.

Timings are scaled down (render lease 3 s in the drills about its expiry, receipt poll 0.2 s,
request deadline 20 s, caps 2). Each drill also passes seed 004's gate (see
`control_fixtures`): occupancy sampled throughout never exceeds the cap, every worker ends idle,
no temp files, no stray browser, no zombie.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from deckyard.decks.validation.render_check import RenderGateway
from deckyard.jobs import JobContext, JobStatus, Runtime
from deckyard.render.control.models import AttemptState, RequestStatus, ScreenshotSpec
from deckyard.render.control.service import RenderService
from tests.drills.conftest import LIVE, start_renderer
from tests.drills.control_fixtures import (
    STOPPED_EPOCHS,
    Plane,
    hygiene,
    nav,
    renderer_env,
    running_plane,
    shared_renderer,
    stop_control_renderer,
)
from tests.drills.control_support import NavigationSite, tagged_processes
from tests.drills.support import DrillSite, RendererProcess, decode_png
from tests.helpers.eventually import eventually, settled_sync

__all__ = ["hygiene", "nav", "shared_renderer"]
pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.slow]

SHORT_LEASE = {"render_lease_seconds": 3.0}
"""Drills 3 and 4 are about a render lease's expiry: theirs is short, so they end quickly."""
SLIDE = "<html><body style='margin:0;background:#c00'><h1>slide</h1></body></html>"


PAGE_CHECK = "drill.page_check"


def page_check_job(runtime: Runtime, service: RenderService) -> None:
    """A job that renders its payload's spec as one request opened for it, as a deck page's
    check does (`RenderGateway.run`), and returns the render's id and result."""
    gateway = RenderGateway(service, runtime)

    @runtime.handler(PAGE_CHECK, queue="render", max_attempts=1)
    async def check(ctx: JobContext) -> dict[str, Any]:
        spec = ScreenshotSpec.model_validate(ctx.payload["spec"])
        outcome = await gateway.run(spec, workspace_id="ws", parent_id=ctx.id, timeout=30)
        return {"request_id": outcome.request_id, "error_code": outcome.error_code}


async def renderer_up(plane: Plane) -> None:
    """Wait until the plane has probed a renderer up (a page check refuses to queue without)."""

    async def up() -> bool:
        return any(r["state"] == "up" for r in await plane.service.renderers())

    await eventually(up, timeout=20, every=0.05, what="a renderer up")


async def request_of(plane: Plane, job_id: int) -> int:
    """The render request a job opened (waiting for it to exist)."""

    async def opened() -> int | None:
        req = await plane.service.request_for_job(job_id)
        return req.id if req is not None else None

    return await eventually(opened, timeout=20, every=0.05)


async def test_drill1_cancel_during_navigation(
    tmp_path: Path, shared_renderer: RendererProcess, nav: NavigationSite
) -> None:
    async with running_plane(tmp_path, shared_renderer) as plane:
        spec = ScreenshotSpec(url=nav.url("d1"), width=320, height=200)
        req_id = (await plane.service.submit(spec, workspace_id="ws")).id

        async def navigating() -> bool:
            return nav.hits.get("d1", 0) >= 1

        await eventually(navigating, timeout=20, every=0.05)
        await plane.service.cancel_request(req_id)
        request = await plane.service.wait_for_terminal(req_id, timeout=10)
        nav.release("d1")
        assert request.status is RequestStatus.CANCELLED
        assert request.result is None and request.artifact_key is None
        [attempt] = await plane.service.attempts(req_id)
        assert attempt.status is AttemptState.CANCELLED
        assert attempt.active_occupancy == 0
        assert await plane.results() == []
        assert await plane.service.artifact(request) is None


async def test_drill2_cancel_while_the_png_is_on_its_way(
    tmp_path: Path, shared_renderer: RendererProcess
) -> None:
    async with running_plane(tmp_path, shared_renderer, before_start=page_check_job) as plane:
        await renderer_up(plane)
        plane.proxy.hold_artifacts = True
        spec = ScreenshotSpec(html=SLIDE, width=320, height=200)
        job = await plane.runtime.enqueue(
            PAGE_CHECK, {"spec": spec.model_dump(mode="json")}, queue="render", workspace_id="ws"
        )
        req_id = await request_of(plane, job.id)
        await asyncio.to_thread(plane.proxy.held.wait, 20)
        assert plane.proxy.held.is_set(), "the real PNG never came back through the proxy"
        await plane.runtime.cancel(job.id)  # the job's cancel reaches the request it opened
        request = await plane.service.wait_for_terminal(req_id, timeout=10)
        plane.proxy.release.set()
        committer = plane.service.coordinator.committer

        async def refused() -> bool:
            return committer.stats.refused >= 1

        await eventually(refused, timeout=20, every=0.05)
        done = await plane.runtime.wait(job.id, timeout=10)
        assert request.status is RequestStatus.CANCELLED
        assert done.status is JobStatus.CANCELLED
        assert committer.stats.committed == 0
        assert (await plane.service.request(req_id)).result is None  # type: ignore[union-attr]
        assert await plane.results() == []


async def test_drill3_sigkill_renderer_lease_expires_then_new_attempt_wins(
    tmp_path: Path, site: DrillSite, nav: NavigationSite
) -> None:
    first = start_renderer(site, slots=2, **renderer_env(nav))
    second: RendererProcess | None = None
    try:
        async with running_plane(tmp_path, first, **SHORT_LEASE) as plane:
            spec = ScreenshotSpec(url=nav.url("d3"), width=320, height=200)
            req_id = (await plane.service.submit(spec, workspace_id="ws")).id

            async def navigating() -> bool:
                attempts = await plane.service.attempts(req_id)
                return (
                    nav.hits.get("d3", 0) >= 1
                    and bool(attempts)
                    and bool(attempts[0].last_receipt_at)
                )

            await eventually(navigating, timeout=20, every=0.05)
            old_epoch = first.ready["epoch"]
            LIVE.pop(first.proc.pid)
            os.kill(first.proc.pid, signal.SIGKILL)
            # blocking calls go to a thread, so that a receipt the renderer sent before its
            # death is committed now, not after the lease is read below
            await asyncio.to_thread(first.stop)
            STOPPED_EPOCHS.add(old_epoch)
            left = await asyncio.to_thread(settled_sync, lambda: tagged_processes({old_epoch}), 15)
            assert not left, "browser outlived kill"
            # the lease as the last receipt left it: nothing can renew it from here on
            [before] = await plane.service.attempts(req_id)

            async def lost() -> bool:
                [a, *_] = await plane.service.attempts(req_id)
                return a.status is AttemptState.LOST

            await eventually(lost, timeout=15, every=0.05)
            [gone, *_] = await plane.service.attempts(req_id)
            assert gone.lease_expires_at == before.lease_expires_at, "renewed without a receipt"
            assert gone.finished_at is not None
            assert gone.finished_at >= before.lease_expires_at
            assert gone.error_code == "RENDER_RESULT_LOST"

            second = start_renderer(site, slots=2, **renderer_env(nav))
            plane.proxy.upstream = second.url
            done = await plane.service.wait_for_terminal(req_id, timeout=30)
            assert done.status is RequestStatus.SUCCEEDED, done
            attempts = await plane.service.attempts(req_id)
            assert [a.status for a in attempts] == [AttemptState.LOST, AttemptState.SUCCEEDED]
            assert attempts[1].renderer_epoch == second.ready["epoch"]
            assert done.result is not None
            assert done.result["attempt_key"] == attempts[1].attempt_key
            assert done.result["content_type"] == "image/png"
            artefact = await plane.service.artifact(done)
            assert artefact is not None
            assert decode_png(artefact)[:2] == (320, 200)
        if first.tmp_dir.exists():
            assert settled_sync(lambda: list(first.tmp_dir.iterdir()), 10) == []
            first.tmp_dir.rmdir()
        first.stderr_path.unlink(missing_ok=True)
    finally:
        nav.release("d3")
        if second is not None:
            stop_control_renderer(second)


async def test_drill4_png_after_lease_expiry_is_refused_new_attempt_wins(
    tmp_path: Path, shared_renderer: RendererProcess
) -> None:
    async with running_plane(tmp_path, shared_renderer, **SHORT_LEASE) as plane:
        plane.proxy.hold_artifacts = True
        spec = ScreenshotSpec(html=SLIDE, width=400, height=300)
        req_id = (await plane.service.submit(spec, workspace_id="ws")).id
        await asyncio.to_thread(plane.proxy.held.wait, 20)
        done = await plane.service.wait_for_terminal(req_id, timeout=30)
        assert done.status is RequestStatus.SUCCEEDED, done
        assert done.result is not None
        plane.proxy.release.set()
        committer = plane.service.coordinator.committer

        async def refused() -> bool:
            return committer.stats.refused >= 1

        await eventually(refused, timeout=20, every=0.05)
        attempts = await plane.service.attempts(req_id)
        assert [a.status for a in attempts] == [AttemptState.LOST, AttemptState.SUCCEEDED]
        assert committer.stats.refused_keys == [f"{attempts[0].attempt_key}#p0"]  # its page
        assert done.result["attempt_key"] == attempts[1].attempt_key
        assert await plane.results() == [done.result["artifact_key"]]
        assert set(plane.proxy.artifacts_served) == {a.attempt_key for a in attempts}


async def test_drill5_navigation_never_completes_under_a_hard_deadline(
    tmp_path: Path, shared_renderer: RendererProcess, nav: NavigationSite
) -> None:
    async with running_plane(
        tmp_path, shared_renderer, render_attempt_timeout_seconds=1.5
    ) as plane:
        spec = ScreenshotSpec(url=nav.url("always-d5"), width=320, height=200)
        req_id = (await plane.service.submit(spec, workspace_id="ws")).id
        request = await plane.service.wait_for_terminal(req_id, timeout=30)
        nav.release("always-d5")
        assert request.status is RequestStatus.FAILED
        assert request.error_code == "RENDER_DEADLINE_EXCEEDED"
        attempts = await plane.service.attempts(req_id)
        assert len(attempts) == 3
        assert {a.error_code for a in attempts} == {"RENDER_DEADLINE_EXCEEDED"}
        assert all(a.active_occupancy == 0 for a in attempts)
        assert request.result is None and request.artifact_key is None
        assert await plane.results() == []
