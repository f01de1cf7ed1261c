"""The renderer's change long-poll: a result is fetched when the attempt ends, not at a poll.

The receipt poll is set to 30 s here, so a screenshot that finishes within 15 s can only have
been fetched because the renderer's `GET /v1/changes` answered: with the receipt and the PNG
inline, committed without a receipt pass.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from deckyard.jobs import JobContext, JobStatus, Runtime
from deckyard.render.control.models import RequestStatus, ScreenshotSpec
from deckyard.render.control.service import RenderService
from tests.drills.control_fixtures import hygiene, nav, running_plane, shared_renderer
from tests.drills.control_support import NavigationSite
from tests.drills.support import RendererProcess, decode_png
from tests.helpers.eventually import eventually

__all__ = ["hygiene", "nav", "shared_renderer"]
pytestmark = [pytest.mark.chromium, pytest.mark.processes]

SLOW_POLL = {
    "render_receipt_poll_seconds": 30.0,
    "render_idle_poll_ceiling_seconds": 30.0,
    "render_lease_seconds": 90.0,
}


async def test_results_arrive_when_the_renderer_says_so_not_at_the_next_poll(
    tmp_path: Path, shared_renderer: RendererProcess
) -> None:
    async with running_plane(tmp_path, shared_renderer, **SLOW_POLL) as plane:
        for round_ in range(3):  # the long-poll ends when the renderer is idle, and reopens
            spec = ScreenshotSpec(
                html=f"<html><body style='background:#00c'>{round_}</body></html>",
                width=160,
                height=90,
            )
            renders = [await plane.service.submit(spec, workspace_id="ws", dedupe=False)]
            renders.append(await plane.service.submit(spec, workspace_id="ws", dedupe=False))
            assert renders[0].id != renders[1].id
            for render in renders:
                done = await plane.service.wait_for_terminal(render.id, timeout=15)
                assert done.status is RequestStatus.SUCCEEDED, done.error_message
                found = await plane.service.artifact(done)
                assert found is not None and decode_png(found)[:2] == (160, 90)
        # The change answers carried the receipts and the PNGs: no receipt pass, no download.
        stats = plane.service.coordinator.receipts.stats
        assert stats.inline >= 1, stats


DECK_JOB = "changes.deck"


def deck_job(runtime: Runtime, service: RenderService) -> None:
    """A job that renders its payload's specs as one deck request."""

    @runtime.handler(DECK_JOB, queue="render")
    async def render(ctx: JobContext) -> dict[str, Any]:
        specs = [ScreenshotSpec.model_validate(s) for s in ctx.payload["specs"]]
        outcomes = await service.decks.render(ctx, specs)
        return {"pages": [o.error_code for o in outcomes]}


async def test_deck_pages_are_committed_from_the_change_answers(
    tmp_path: Path, shared_renderer: RendererProcess, nav: NavigationSite
) -> None:
    # With a 30 s receipt poll, the deck finishing within 20 s needs the change answers. Page 1
    # is held until page 0 is committed, so page 0 ends while the deck is live: its commit comes
    # from the receipt the change answer carries, not from a receipt pass. (Unheld, a warm
    # renderer finished the whole deck before the first answer, which then carried its end.)
    tag = f"cd{os.getpid()}{tmp_path.name[-6:]}"
    names = [f"{tag}-p{i}" for i in range(3)]
    for name in (names[0], names[2]):
        nav.release(name)
    specs = [
        ScreenshotSpec(url=nav.url(name), width=160, height=90).model_dump(mode="json")
        for name in names
    ]
    async with running_plane(
        tmp_path, shared_renderer, before_start=deck_job, **SLOW_POLL
    ) as plane:
        try:
            job = await plane.runtime.enqueue(DECK_JOB, {"specs": specs}, queue="render")

            async def page_0_committed() -> bool:
                req = await plane.service.request_for_job(job.id)
                if req is None:
                    return False
                return any(
                    p.committed and p.page_index == 0 for p in await plane.service.pages(req.id)
                )

            await eventually(page_0_committed, timeout=20, every=0.05)
            stats = plane.service.coordinator.receipts.stats
            assert stats.from_changes >= 1, stats
        finally:
            nav.release(names[1])
        done = await plane.runtime.wait(job.id, timeout=20)
        assert done.status is JobStatus.SUCCEEDED, done.error_message
        assert done.result == {"pages": [None] * len(names)}
