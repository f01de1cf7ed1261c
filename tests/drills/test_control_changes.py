"""The renderer's change long-poll: a result is fetched when the attempt ends, not at a poll.

The receipt poll is set to 30 s here, so a screenshot that finishes within 15 s can only have
been fetched because the renderer's `GET /v1/changes` answered: with the receipt and the PNG
inline, committed without a receipt pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deckyard.jobs import JobStatus
from deckyard.render.control.models import ScreenshotSpec
from tests.drills.control_fixtures import hygiene, nav, running_plane, shared_renderer
from tests.drills.support import RendererProcess, decode_png

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
            jobs = [await plane.service.screenshot(spec, workspace_id="ws", dedupe=False)]
            jobs.append(await plane.service.screenshot(spec, workspace_id="ws", dedupe=False))
            for job in jobs:
                done = await plane.runtime.wait(job.id, timeout=15)
                assert done.status is JobStatus.SUCCEEDED, done.error_message
                found = await plane.service.artifact_for_job(job.id)
                assert found is not None and decode_png(found[0])[:2] == (160, 90)
        # The change answers carried the receipts and the PNGs: no receipt pass, no download.
        stats = plane.service.coordinator.receipts.stats
        assert stats.inline >= 1, stats
